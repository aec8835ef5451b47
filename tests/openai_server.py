"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API (JSON and SSE
streaming) and answers from a script: the LLM path's tests talk to it with the real `openai` client.

Each request takes the next step of the script:
  {"content": "..."}                      an answer (streamed in pieces when the request streams)
  {"status": 429, "retry_after": 0}       an error status (with Retry-After when given)
  {"sleep": 3.0, "content": "..."}        answer only after sleeping (the client's timeout fires)
  {"chunk_delay": 0.5, "content": "..."}  stream slowly, a pause between pieces (for cancellation)
Requests (body and headers) are recorded for the tests to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedOpenAI:
    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with outer._lock:
                    outer.requests.append({"path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
                    step = outer.script.pop(0) if outer.script else {"status": 500, "content": "script exhausted"}
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                if step.get("sleep"):
                    time.sleep(step["sleep"])
                if "status" in step:
                    headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else {}
                    return self._json(step["status"], {"error": {"message": step.get("content", "error"),
                                                                 "type": "scripted"}}, headers)
                text = step["content"]
                usage = {"prompt_tokens": sum(len(m["content"]) for m in body["messages"]) // 4,
                         "completion_tokens": max(1, len(text) // 4)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                if body.get("stream"):
                    return self._stream(body, text, usage, step.get("chunk_delay", 0.0))
                return self._json(200, {
                    "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": usage})

            def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], text: str, usage: dict[str, int], delay: float) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
                size = max(1, len(text) // 8)
                pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
                try:
                    for k, piece in enumerate(pieces):
                        delta = {"content": piece} | ({"role": "assistant"} if k == 0 else {})
                        self._event(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                        if delay:
                            time.sleep(delay)
                    self._event(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    if (body.get("stream_options") or {}).get("include_usage"):
                        self._event(base | {"choices": [], "usage": usage})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading (cancelled)
                self.close_connection = True

            def _event(self, payload: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
