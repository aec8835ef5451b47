"""Python's ast.parse (and literal_eval, which parses) behind one lock.

CPython 3.11 keeps the AST constructor's recursion depth in per-interpreter state, not per thread:
a thread that starts a parse while another is turning its tree into Python objects resets that
depth, and the other ends in SystemError "AST constructor recursion depth mismatch (before=27,
after=25)" (seen from threaded programs: pytest-dev/pytest#10763, home-assistant/core#95364). The
bench and the optimize loop verify candidates on several threads, each running the static check
(an ast.parse of the candidate); a local run of the several-GPU bench test failed with exactly
that message."""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    with _LOCK:
        return ast.parse(source, filename=filename)


def literal_eval(text: str) -> Any:
    with _LOCK:
        return ast.literal_eval(text)
