"""One GPU at a time for the phases whose numbers a neighbour would spoil (correctness runs,
timing, Nsight Compute): an exclusive flock on a file named per GPU, shared by every worker and
Verifier process on the machine.

Where `state` names a file, the worker says there whether it is waiting for the lock or holding
it, and since when (CLOCK_MONOTONIC, the same for every process): the Verifier does not count the
wait against the candidate's time limit, and limits how long one candidate may hold the GPU. That
file is in the run folder, the candidate's to write: a wait is counted only while the lock is held
(`held`), so a candidate that says it waits forever is still timed out."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LockState:
    state: str  # "waiting" | "holding" | "free"
    since: float  # time.monotonic() when it entered that state

    @staticmethod
    def read(path: Path) -> LockState | None:
        try:
            data = json.loads(path.read_text())
            return LockState(str(data["state"]), float(data["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # not written yet, or being replaced


def _say(state: Path | None, what: str) -> None:
    if state is None:
        return
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps({"state": what, "since": time.monotonic()}))
    os.replace(tmp, state)  # whole, for a reader polling it


@contextlib.contextmanager
def file_lock(path: str | None, state: Path | None = None) -> Iterator[None]:
    if not path:
        yield
        return
    with open(path, "a") as f:
        _say(state, "waiting")
        fcntl.flock(f, fcntl.LOCK_EX)
        _say(state, "holding")
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
            _say(state, "free")


def held(path: str | None) -> bool:
    """Whether some open file holds the lock now: tried without waiting, and let go at once."""
    if not path:
        return False
    try:
        with open(path, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except OSError:
        return True  # (cannot tell: the worker's word stands, as before)
