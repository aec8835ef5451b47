"""The preloaded watch (agents/verify/native_threads.c) must not change what the processes it is
preloaded into can load: glibc's dlopen searches a bare name along the asking library's RUNPATH,
found by the return address, so the watch's dlopen must hand over with a jump, not a call."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stitchcuda.agents.verify import native_threads

COMPILER = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(COMPILER is None, reason="no C compiler to build the watch")


def _build(src: Path, out: Path) -> None:
    import subprocess

    subprocess.run([COMPILER, "-O2", "-shared", "-fPIC", "-o", str(out), str(src), "-ldl"], check=True,
                   capture_output=True, timeout=120)


@needs_cc
def test_the_built_watch_passes_its_probe(tmp_path):
    lib = native_threads.library(tmp_path / "cache")
    assert lib is not None and lib.exists()
    # The probe run again on the library the cache kept: a RUNPATH-only library loads under it.
    (tmp_path / "again").mkdir()
    assert native_threads._probe(COMPILER, tmp_path / "again", lib)


@needs_cc
def test_a_watch_whose_dlopen_asks_as_itself_fails_the_probe(tmp_path):
    """The probe can fail: the same source with dlopen's result kept in its own frame (a call, then
    a return) asks glibc as the watch library, which has no RUNPATH."""
    from importlib import resources

    text = resources.files("stitchcuda.agents.verify").joinpath(native_threads.SOURCE).read_text()
    tail = "  return real ? real(file, mode) : 0;\n}\n"
    assert text.endswith(tail)
    calling = text[: -len(tail)] + ("  void* h = real ? real(file, mode) : 0;\n"
                                    "  __asm__ volatile(\"\" : : \"r\"(h) : \"memory\");\n  return h;\n}\n")
    src = tmp_path / "calling.c"
    src.write_text(calling)
    lib = tmp_path / "calling.so"
    _build(src, lib)
    (tmp_path / "p").mkdir()
    assert not native_threads._probe(COMPILER, tmp_path / "p", lib)


def test_tools_run_without_the_watch_and_keep_the_users_preloads():
    env = {"LD_PRELOAD": "/c/native_threads.0123456789abcdef.so:/usr/lib/libmine.so", "PATH": "/bin"}
    assert native_threads.without(env) == {"LD_PRELOAD": "/usr/lib/libmine.so", "PATH": "/bin"}
    assert native_threads.without({"LD_PRELOAD": "/c/native_threads.0123456789abcdef.so"}) == {}
    assert native_threads.without({"PATH": "/bin"}) == {"PATH": "/bin"}
