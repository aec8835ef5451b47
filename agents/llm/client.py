"""Chat completions from any OpenAI-compatible server (OpenAI, vLLM, SGLang, Ollama, LM Studio).

On the `openai` package, with what its retries do not give us: retries we count and can cancel
(429 and 5xx, honouring Retry-After, with backoff), streaming with a fallback for servers that
refuse it, cancellation between streamed chunks, token and cost accounting, and a response cache
keyed by the request, so a rerun with the same inputs costs nothing. Plain text in, plain text out:
no tool calling or JSON mode is required of the server.

The API key comes from the environment (STITCHCUDA_LLM_API_KEY, else OPENAI_API_KEY; the editor
passes its secret that way) and is kept only in the client object: `scrub` removes it from any
text this module lets out (errors, logs), and the cache never stores requests' headers.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

KEY_ENVS = ("STITCHCUDA_LLM_API_KEY", "OPENAI_API_KEY")


class LLMError(RuntimeError):
    """A request that did not produce an answer (its message never contains the key)."""


class LLMCancelled(LLMError):
    pass


@dataclass
class LLMConfig:
    base_url: str
    model: str
    timeout_s: float = 180.0
    max_retries: int = 4
    backoff_s: float = 1.0  # first retry's wait; doubles, capped at 30 s, unless Retry-After says
    stream: bool = True
    temperature: float = 0.2
    max_tokens: int = 8192
    price_in_per_mtok: float = 0.0  # USD per million prompt tokens, for the run's cost estimate
    price_out_per_mtok: float = 0.0
    cache_dir: str | None = None  # None: no cache

    @classmethod
    def from_env(cls, **over: Any) -> LLMConfig:
        env = os.environ
        base = over.pop("base_url", None) or env.get("STITCHCUDA_LLM_ENDPOINT") or "https://api.openai.com/v1"
        model = over.pop("model", None) or env.get("STITCHCUDA_LLM_MODEL")
        if not model:
            raise LLMError("no model: set STITCHCUDA_LLM_MODEL (or the editor's stitchcuda.llmModel setting)")
        for name, var, kind in (("timeout_s", "STITCHCUDA_LLM_TIMEOUT", float),
                                ("max_retries", "STITCHCUDA_LLM_MAX_RETRIES", int),
                                ("backoff_s", "STITCHCUDA_LLM_BACKOFF", float)):
            if name not in over and env.get(var):
                over[name] = kind(env[var])
        if "cache_dir" not in over:
            cache = env.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
            over["cache_dir"] = str(Path(cache) / "stitchcuda" / "llm")
        return cls(base_url=base, model=model, **over)


@dataclass
class Usage:
    calls: int = 0
    cached_calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Attempt:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class LLMClient:
    config: LLMConfig
    cancel: threading.Event | None = None
    usage: Usage = field(default_factory=Usage)
    _key: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        import openai

        self._key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), "") or "none"
        # Our own retry loop (counted, cancellable): the library's is off.
        self._client = openai.OpenAI(base_url=self.config.base_url, api_key=self._key,
                                     timeout=self.config.timeout_s, max_retries=0)
        self._stream_ok = self.config.stream

    def scrub(self, text: str) -> str:
        return text.replace(self._key, "[api key]") if self._key and self._key != "none" else text

    def _cache_path(self, messages: Sequence[dict[str, str]]) -> Path | None:
        if not self.config.cache_dir:
            return None
        c = self.config
        body = json.dumps({"base_url": c.base_url, "model": c.model, "temperature": c.temperature,
                           "max_tokens": c.max_tokens, "messages": list(messages)}, sort_keys=True)
        return Path(c.cache_dir) / f"{hashlib.sha256(body.encode()).hexdigest()}.json"

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        """The assistant's answer to `messages`; raises LLMError (or LLMCancelled)."""
        path = self._cache_path(messages)
        if path is not None and path.is_file():
            self.usage.calls += 1
            self.usage.cached_calls += 1
            return json.loads(path.read_text())["text"]
        t0 = time.monotonic()
        try:
            got = self._with_retries(messages)
        finally:
            self.usage.seconds += time.monotonic() - t0
        self.usage.calls += 1
        self.usage.prompt_tokens += got.prompt_tokens
        self.usage.completion_tokens += got.completion_tokens
        c = self.config
        self.usage.cost_usd += (got.prompt_tokens * c.price_in_per_mtok + got.completion_tokens * c.price_out_per_mtok) / 1e6
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"text": got.text, "prompt_tokens": got.prompt_tokens,
                                        "completion_tokens": got.completion_tokens}))
        return got.text

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _with_retries(self, messages: Sequence[dict[str, str]]) -> _Attempt:
        import openai

        last = ""
        attempt = 0
        while True:
            if self._cancelled():
                raise LLMCancelled("cancelled")
            wait = None
            try:
                return self._once(messages)
            except openai.APIStatusError as e:
                last = f"HTTP {e.status_code}: {self.scrub(str(e.message))[:300]}"
                if e.status_code == 429 or e.status_code >= 500:
                    wait = _retry_after(e.response)
                elif self._stream_ok and e.status_code in (400, 404, 422, 501):
                    # A server that cannot stream: again without streaming (not a retry), and
                    # never streamed to again.
                    self._stream_ok = False
                    continue
                else:
                    raise LLMError(f"the LLM server refused the request: {last}") from None
            except openai.APITimeoutError:
                last = f"no answer within {self.config.timeout_s:g} s"
            except openai.APIConnectionError as e:
                last = f"cannot reach {self.config.base_url}: {self.scrub(str(e))[:200]}"
            if attempt >= self.config.max_retries:
                raise LLMError(f"the LLM request failed after {attempt + 1} attempt(s): {last}")
            attempt += 1
            self.usage.retries += 1
            delay = wait if wait is not None else min(30.0, self.config.backoff_s * 2 ** (attempt - 1))
            if self.cancel is not None:
                if self.cancel.wait(delay):
                    raise LLMCancelled("cancelled")
            else:
                time.sleep(delay)

    def _once(self, messages: Sequence[dict[str, str]]) -> _Attempt:
        c = self.config
        kw: dict[str, Any] = {"model": c.model, "messages": list(messages), "temperature": c.temperature,
                              "max_tokens": c.max_tokens}
        if not self._stream_ok:
            r = self._client.chat.completions.create(**kw)
            u = r.usage
            return _Attempt(r.choices[0].message.content or "", u.prompt_tokens if u else 0, u.completion_tokens if u else 0)
        stream = self._client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
        parts: list[str] = []
        got = _Attempt("")
        try:
            for chunk in stream:
                if self._cancelled():
                    raise LLMCancelled("cancelled")
                if chunk.usage is not None:
                    got.prompt_tokens, got.completion_tokens = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
                for choice in chunk.choices or []:
                    if choice.delta and choice.delta.content:
                        parts.append(choice.delta.content)
        finally:
            stream.close()
        got.text = "".join(parts)
        if not got.completion_tokens:  # servers that do not report usage: an estimate, 4 chars a token
            got.completion_tokens = len(got.text) // 4
            got.prompt_tokens = got.prompt_tokens or sum(len(m["content"]) for m in messages) // 4
        return got


def _retry_after(response: Any) -> float | None:
    try:
        value = response.headers.get("retry-after")
        return max(0.0, min(60.0, float(value))) if value is not None else None
    except (AttributeError, ValueError):
        return None
