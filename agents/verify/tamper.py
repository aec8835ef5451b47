"""What the timing reads must be what the worker set up before the candidate's code ran.

KernelBench's timing reads CUDA events, synchronise and the clock through module attributes that
any imported module can rebind: a candidate that replaces `torch.cuda.Event.elapsed_time` when
imported reports any time it likes. The worker takes a snapshot of every object the timing path
relies on before it imports the candidate (`snapshot`), the timing module binds the primitives it
calls at its own import (agents/verify/timing.py), and after the candidate has run, and again after
timing, `changed` names anything rebound since: a `timing-tamper` finding.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from stitchcuda.agents.verify import timing

# (label, owner, attribute names): the objects whose identity the timing and the comparison rely on.
_WATCHED: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
    ("torch.cuda", torch.cuda, ("Event", "synchronize", "current_device", "current_stream", "default_stream",
                                "Stream", "set_device", "device", "stream")),
    ("torch.cuda.Event", torch.cuda.Event, ("record", "elapsed_time", "synchronize", "query", "wait", "__init__",
                                            "__new__")),
    ("torch.Tensor", torch.Tensor, ("copy_", "zero_", "clone", "__torch_function__", "data_ptr", "cuda", "to")),
    ("torch", torch, ("empty", "equal", "allclose", "isclose", "cuda")),
    ("time", time, ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
                    "process_time")),
    ("statistics", statistics, ("median", "mean")),
    ("timing", timing, ("time_cuda", "L2Flusher")),
    ("timing.L2Flusher", timing.L2Flusher, ("__call__", "__init__")),
)


def snapshot() -> dict[str, Any]:
    """`owner.attr` -> the object there now (class attributes read from the class's own dict, so a
    replacement on the class itself is seen even where a base defines the original)."""
    out: dict[str, Any] = {}
    for label, owner, names in _WATCHED:
        for name in names:
            out[f"{label}.{name}"] = _get(owner, name)
    return out


def changed(before: dict[str, Any], *, except_from: tuple[str, ...] = ()) -> list[str]:
    """The watched names now bound to another object than at `before` (added or removed counts).

    `except_from`: packages whose own objects may have been put there meanwhile (torch.compile runs
    during timing, and PyTorch may patch itself): those are not the candidate's doing. The timing
    does not depend on this check (it bound its primitives before the candidate was imported); the
    check says that a candidate tried."""
    now = snapshot()
    names = [k for k in before.keys() | now.keys() if before.get(k, _MISSING) is not now.get(k, _MISSING)]
    return sorted(k for k in names if not _from(now.get(k), except_from))


def _from(value: Any, packages: tuple[str, ...]) -> bool:
    module = getattr(value, "__module__", None) or ""
    return bool(packages) and module.split(".")[0] in packages


_MISSING = object()


def _get(owner: Any, name: str) -> Any:
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return _MISSING
    return getattr(owner, name, _MISSING)
