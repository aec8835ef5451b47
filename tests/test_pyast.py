"""ast.parse behind one lock (stitchcuda.pyast): CPython 3.11's AST constructor keeps its recursion
depth per interpreter, so two threads parsing at once can fail with SystemError (the several-GPU
bench test did, locally). The bench and the optimize loop run the static check, the
task check and the coder on several threads; every parse of ours goes through the lock."""

from __future__ import annotations

import ast
import contextlib
import threading
import time

import pytest

from stitchcuda import pyast
from stitchcuda.agents.verify.static_check import check_source

SOURCE = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_the_helpers_parse_as_ast_does():
    assert ast.dump(pyast.parse(SOURCE)) == ast.dump(ast.parse(SOURCE))
    assert pyast.literal_eval("(1, 2.5, 'a')") == (1, 2.5, "a")
    with pytest.raises(SyntaxError):
        pyast.parse("def (")


def _most_at_once(monkeypatch, lock) -> int:
    """Threads running the static check at once, each parse made slow enough to overlap."""
    real = ast.parse
    inside, most = [0], [0]
    guard = threading.Lock()

    def slow_parse(*args, **kwargs):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.01)
        try:
            return real(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(pyast.ast, "parse", slow_parse)
    monkeypatch.setattr(pyast, "_LOCK", lock)
    threads = [threading.Thread(target=lambda: [check_source(SOURCE) for _ in range(3)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return most[0]


def test_parses_from_several_threads_run_one_at_a_time(monkeypatch):
    assert _most_at_once(monkeypatch, threading.Lock()) == 1


def test_without_the_lock_they_would_overlap(monkeypatch):
    """The measurement above can see an overlap: with the lock taken away, it does."""
    assert _most_at_once(monkeypatch, contextlib.nullcontext()) > 1


def _direct_parses(path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path}:{n.lineno}" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("parse", "literal_eval")
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "ast"]


def test_no_module_of_ours_parses_past_the_lock():
    """A parse outside the lock is enough to fail a several-thread run (CI's two-GPU optimize test did, at
    e067a17, from the native-source reading): every ast.parse and ast.literal_eval of the package is the
    one in stitchcuda/pyast.py."""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    found = [hit for folder in ("stitchcuda", "agents", "profiling", "server")
             for path in sorted((root / folder).rglob("*.py")) if path.name != "pyast.py"
             for hit in _direct_parses(path)]
    assert found == []
    assert _direct_parses(root / "stitchcuda" / "pyast.py")  # the reading finds the ones that are there
