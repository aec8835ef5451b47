"""An LLM's answer -> the candidate's files, or a precise reason why not (sent back to the model).

Accepted shapes: a JSON object {"files": {name: text}} (or a list of {"path", "content"}), bare or
in a ```json fence; or fenced code blocks, each named by its info string (```cuda kernels.cu,
```python title="model_new.py"), by a line just above it (`kernels.cu:`, `### File: kernels.cu`),
or by a first-line comment (`# file: model_new.py`, `// kernels.cu`).
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

MODULE = "model_new.py"
SOURCE_EXTS = (".cu", ".cuh", ".cpp", ".h", ".hpp", ".c")
_FENCE = re.compile(r"^```[ \t]*([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_NAME = r"([\w.\-/]+\.(?:py|cu|cuh|cpp|c|h|hpp))"


class ParseError(ValueError):
    pass


def _clean_name(name: str) -> str:
    name = name.strip().strip("`'\"*:").strip()
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts:
        raise ParseError(f"file name {name!r} leaves the candidate's folder: use a plain name")
    return p.name


def _from_json(text: str) -> dict[str, str] | None:
    body = text.strip()
    m = re.fullmatch(r"```(?:json)?\s*\n(.*)\n```", body, re.S)
    if m:
        body = m.group(1)
    if not body.startswith("{"):
        return None
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise ParseError(f"the JSON answer does not parse: {e.msg} at line {e.lineno} column {e.colno}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if isinstance(files, list):
        files = {f.get("path") or f.get("name"): f.get("content") for f in files if isinstance(f, dict)}
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ParseError('the JSON answer needs "files": {"model_new.py": "...", "kernels.cu": "..."}')
    return {_clean_name(k): v for k, v in files.items()}


def _block_name(info: str, before: str, body: str) -> str | None:
    m = re.search(_NAME, info)
    if m:
        return m.group(1)
    last = before.rstrip("\n").rsplit("\n", 1)[-1]
    m = re.fullmatch(r"\s*(?:#+\s*)?(?:\*\*)?(?:file(?:name)?\s*[:=]?\s*)?`?" + _NAME + r"`?(?:\*\*)?\s*:?\s*", last, re.I)
    if m:
        return m.group(1)
    first = body.split("\n", 1)[0]
    m = re.fullmatch(r"\s*(?:#|//)\s*(?:file(?:name)?\s*:?\s*)?" + _NAME + r"\s*", first, re.I)
    return m.group(1) if m else None


def parse_files(text: str) -> dict[str, str]:
    files = _from_json(text)
    if files is None:
        files = {}
        for m in _FENCE.finditer(text):
            name = _block_name(m.group(1), text[: m.start()], m.group(2))
            if name is None:
                continue
            name = _clean_name(name)
            if name in files:
                raise ParseError(f"two code blocks are both named {name}: send each file once")
            files[name] = m.group(2)
    if not files:
        raise ParseError("no files found: send each file in its own fenced code block with its file name "
                         "in the info string, e.g. ```python model_new.py and ```cuda kernels.cu")
    return validate(files)


def validate(files: dict[str, str]) -> dict[str, str]:
    py = [n for n in files if n.endswith(".py")]
    with_model = [n for n in py if re.search(r"^class\s+ModelNew\b", files[n], re.M)]
    if not with_model:
        raise ParseError("no Python file defines `class ModelNew(nn.Module)`")
    if len(with_model) > 1:
        raise ParseError(f"several files define ModelNew ({', '.join(with_model)}): send one")
    if with_model[0] != MODULE:
        files = {MODULE if n == with_model[0] else n: t for n, t in files.items()}
    sources = [n for n in files if n.endswith(SOURCE_EXTS)]
    if not sources:
        raise ParseError("no .cu source: the computation must be in CUDA/C++ loaded with stitchcuda.runtime")
    module = files[MODULE]
    for ref in sorted(set(re.findall(r"""["']([\w.\-]+\.(?:cu|cuh|cpp|c))["']""", module))):
        if ref not in files:
            raise ParseError(f"{MODULE} loads {ref}, which the answer does not contain")
    try:
        compile(module, MODULE, "exec")
    except SyntaxError as e:
        raise ParseError(f"{MODULE} line {e.lineno}: SyntaxError: {e.msg}") from None
    return files
