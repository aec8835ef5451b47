"""One GPU at a time for the phases whose numbers a neighbour would spoil (correctness runs,
timing, Nsight Compute): an exclusive flock on a file named per GPU, shared by every worker and
Verifier process on the machine. With STITCHCUDA_SHARED_CHECKS=1 the phases that only compute hold
it shared, beside each other, behind a turnstile that keeps timing from waiting for ever.

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


SHARED_ENV = "STITCHCUDA_SHARED_CHECKS"


def shared_checks() -> bool:
    """Whether phases that only compute (the blind check's witness and referee, the worker's check of
    changed weights) may share the GPU with each other, while correctness (a candidate's first calls
    may time its kernels to choose them), timing and Nsight Compute hold it alone
    (STITCHCUDA_SHARED_CHECKS=1; off by default: on one H200 the same 16 problems took 267.9 s with it
    against 243.3 s without, the checks that may share holding the lock under 1.3 s a problem beside
    correctness and timing; bench/results/2026-12-01-h200-level3-rest-hardening-3502def.md)."""
    return os.environ.get(SHARED_ENV) == "1"


# Set by the bench while several workers verify side by side on one GPU ("1"), and for the run
# alone of a problem that ran out of memory there ("0"); read by the Verifier into its request.
BESIDE_ENV = "STITCHCUDA_BESIDE_OTHERS"


def beside_others() -> bool:
    """Whether other verifications share this GPU's memory now (STITCHCUDA_BESIDE_OTHERS=1): a
    check that runs out of it ends the run as out of memory (which the bench runs again alone)
    instead of letting what it would have judged stand unjudged."""
    return os.environ.get(BESIDE_ENV) == "1"


def turnstile_path(path: str) -> str:
    """The turnstile's file beside the GPU's lock file, a `.lock` too: the sandbox binds both and makes
    a missing one first. (The first version, 77e150f, left it unbound: each sandboxed taker made a
    turnstile of its own in its private /tmp, and checks could keep a waiting timing out.)"""
    p = Path(path)
    return str(p.with_name(f"{p.stem}-turn.lock")) if p.suffix == ".lock" else f"{path}-turn.lock"


def lock_files(path: str | None) -> list[str]:
    """The files a taker of the GPU's lock opens (the lock and its turnstile): what a sandboxed
    worker and witness must have bound, read-only (flock needs no write access; a writable lock
    file shared by every sandbox would be a channel between candidates)."""
    return [path, turnstile_path(path)] if path else []


def _open(path: str):
    """The lock file, read-only: made first where it is missing (outside a sandbox; inside one, the
    sandbox made it before binding it)."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        with open(path, "ab"):
            pass
        return open(path, "rb")


@contextlib.contextmanager
def file_lock(path: str | None, state: Path | None = None, *, shared: bool = False) -> Iterator[None]:
    """The GPU's lock, exclusive; with `shared` (and shared_checks()), held beside other shared
    holders. Under shared_checks() every taker passes a turnstile first, held by an exclusive taker
    while it waits, so a stream of shared holders cannot keep timing out for ever (flock alone
    would let them)."""
    if not path:
        yield
        return
    sharing = shared_checks()
    with _open(path) as f:
        _say(state, "waiting")
        if sharing:
            with _open(turnstile_path(path)) as turn:
                fcntl.flock(turn, fcntl.LOCK_EX)
                try:
                    fcntl.flock(f, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                finally:
                    fcntl.flock(turn, fcntl.LOCK_UN)
        else:
            fcntl.flock(f, fcntl.LOCK_EX)
        _say(state, "holding")
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
            _say(state, "free")


def held(path: str | None) -> bool:
    """Whether some open file holds the lock, or its turnstile, now: tried without waiting, and let go
    at once. (The turnstile too: a taker waits there while another waits for the lock, and a candidate
    holding the turnstile alone would otherwise have its honest neighbours' waits counted.)"""
    if not path:
        return False
    return _held(path) or (shared_checks() and _held(turnstile_path(path)))


def _held(path: str) -> bool:
    try:
        with _open(path) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except OSError:
        return True  # (cannot tell: the worker's word stands, as before)
