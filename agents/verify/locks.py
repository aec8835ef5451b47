"""One GPU at a time for the phases whose numbers a neighbour would spoil (correctness runs,
timing, Nsight Compute): an exclusive flock on a file named per GPU, shared by every worker and
Verifier process on the machine."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator


@contextlib.contextmanager
def file_lock(path: str | None) -> Iterator[None]:
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
