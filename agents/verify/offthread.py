"""Work the candidate starts off the calling thread (issue 18 point 1).

The dispatch recorder sees the ops of the thread that calls forward; the timer sees the work of the
stream it records on. A candidate that hands PyTorch's own ops to a thread of its own, or to another
process, escapes both. Every Python thread starts through `_thread`'s start functions (threading,
concurrent.futures and direct calls alike), which the worker wraps before the candidate is imported
(Python 3.11 raises no audit event for them); processes raise audit events (os.fork, subprocess,
os.system). The worker watches while the candidate is imported and built (threads only: both
legitimately run nvcc) and while its forward runs, and each start it saw becomes a finding. A thread
its __init__ started (a red-team candidate's, 2026-11-30, serving forward's work) counts too.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from stitchcuda.agents.verify import native_threads
from stitchcuda.agents.verify.private_log import private_log

THREADS = ("_thread.start_new_thread",)
PROCESSES = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
             "subprocess.Popen", "pty.spawn")  # fmt: skip


@dataclass
class _Watch:
    phase: str = ""  # "" while not watching
    seen: list[tuple[str, str]] = field(default_factory=list)  # (phase, audit event)


# Phases whose processes are the candidate's build (nvcc, ninja: load_inline at import or in __init__).
BUILDING = ("import", "construction")
_watch = _Watch()
_installed = False


_log_add, _log_entries = private_log()  # what seen() reads (private_log.py)


def _note(item: tuple[str, str]) -> None:
    _watch.seen.append(item)
    _log_add(item)


def _hook(event: str, args: tuple) -> None:
    phase = _watch.phase
    if not phase:
        return
    if event in THREADS or (phase not in BUILDING and event in PROCESSES):
        _note((phase, event))


def _counted(start: Callable[..., Any], event: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _hook(event, args)
        return start(*args, **kwargs)

    return wrapper


def install() -> None:
    """Once per process (audit hooks cannot be removed; this one does nothing outside `watching`)."""
    global _installed
    if _installed:
        return
    sys.addaudithook(_hook)
    for name in ("start_new_thread", "start_joinable_thread", "start_new"):
        original = getattr(_thread, name, None)
        if original is not None:
            setattr(_thread, name, _counted(original, THREADS[0]))
    # threading keeps its own reference to the start function, taken when it was imported.
    for name in ("_start_new_thread", "_start_joinable_thread"):
        original = getattr(threading, name, None)
        if original is not None:
            setattr(threading, name, _counted(original, THREADS[0]))
    _installed = True


_native: native_threads.Watch | None = None


def own_libraries(folders: list[str]) -> None:
    """Folders whose shared libraries are the candidate's (its run folder, the build cache): a
    native thread started from code in one of them is the candidate's (native_threads.py)."""
    global _native
    _native = _native or native_threads.Watch()
    _native.own = [os.path.realpath(f) for f in folders]


def native_watch_on() -> bool:
    return bool(_native and _native.available)


LOOKUPS_OVERFLOW = native_threads.OVERFLOW


def changed_libraries() -> list[str]:
    """The candidate's libraries removed or replaced since they loaded (native_threads.Watch)."""
    return _native.changed_since_loaded() if _native else []


def aten_lookups() -> list[str]:
    """The mangled ATen names looked up by dlsym in this process (native_threads.Watch.looked_up)."""
    return _native.looked_up() if _native else []


@contextlib.contextmanager
def watching(phase: str) -> Iterator[None]:
    install()
    outer, _watch.phase = _watch.phase, phase
    mark = _native.mark() if _native else 0
    try:
        yield
    finally:
        if _native:
            for lib in _native.started_since(mark):
                _note((phase, f"a native thread started by {lib}" if lib != native_threads.OVERFLOW_THREADS
                                    else f"{lib} (each may be the candidate's)"))
        _watch.phase = outer


def seen() -> list[tuple[str, str]]:
    """(phase, audit event) of everything started while watching, in order, without repeats."""
    return list(dict.fromkeys(_log_entries()))
