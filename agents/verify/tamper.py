"""What the timing reads must be what the worker set up before the candidate's code ran.

KernelBench's timing reads CUDA events, synchronise and the clock through module attributes that
any imported module can rebind: a candidate that replaces `torch.cuda.Event.elapsed_time` when
imported reports any time it likes. The worker takes a snapshot of every object the timing path
relies on before it imports the candidate (`snapshot`), the timing module binds the primitives it
calls at its own import (agents/verify/timing.py), and after the candidate has run, and again after
timing, `changed` names anything rebound since: a `timing-tamper` finding.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import statistics
import sys
import time
import types
from typing import Any

import torch

from stitchcuda.agents.verify import timing

# (label, owner, attribute names): the objects whose identity the timing and the comparison rely on.
_WATCHED: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
    ("torch.cuda", torch.cuda, ("Event", "synchronize", "current_device", "current_stream", "default_stream",
                                "Stream", "set_device", "device", "stream", "_sleep")),
    # The stream check and the timing floor profile after the timed calls (dynamic_check.kernel_timeline):
    # the profiler's methods, and the spin kernel its markers are.
    ("torch.profiler.profile", torch.profiler.profile, ("__init__", "__enter__", "__exit__", "start", "stop",
                                                        "export_chrome_trace", "events", "key_averages")),
    ("torch.cuda.Event", torch.cuda.Event, ("record", "elapsed_time", "synchronize", "query", "wait", "__init__",
                                            "__new__")),
    ("torch.Tensor", torch.Tensor, ("copy_", "zero_", "clone", "__torch_function__", "data_ptr", "cuda", "to")),
    ("torch", torch, ("empty", "equal", "allclose", "isclose", "cuda")),
    ("time", time, ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
                    "process_time")),
    ("statistics", statistics, ("median", "mean")),
    ("timing", timing, ("time_cuda", "L2Flusher")),
    ("timing.L2Flusher", timing.L2Flusher, ("__call__", "__init__")),
    # What a verdict used to be saved through (report.py binds its own now): rebinding them is an attempt.
    ("json", json, ("dumps", "dump", "loads", "load")),
    ("json.JSONEncoder", json.JSONEncoder, ("encode", "iterencode", "default")),
    ("dataclasses", dataclasses, ("asdict", "astuple", "fields", "replace")),
    ("os", os, ("write", "replace", "rename", "_exit", "kill")),
)


# Whole namespaces the checks call into, by every name they had: the Verifier's own modules (a
# candidate that imports `__main__` can rebind the worker's comparison), the tensor type whose methods
# the comparisons call (`Tensor.double` returning zeros makes every output match), torch.testing and
# torch.nn.functional, and the reference's module and classes (a patched `Model.forward` makes the
# reference agree with anything). Seen 2026-11-26 (a red-team review): each was accepted before.
_OWN_MODULES = ("__main__", "stitchcuda.agents.verify", "stitchcuda.agents.random_draws", "stitchcuda.types",
                "stitchcuda.task")
# ... and what the reference's own code calls through: the torch namespace (`torch.relu` rebound to
# return zeros made the reference return zeros) and torch.nn's modules with their classes (the
# module-level `F` of torch.nn.modules.linear replaced, or `nn.Linear.forward`, made nn.Linear's
# output zeros): a second red-team review, 2026-11-28, each accepted before.
_TORCH_MODULES = ("torch.nn.modules.",)


def _namespaces(extra: tuple[Any, ...], rebound_only: tuple[Any, ...] = ()) -> list[tuple[str, Any, bool]]:
    """(label, namespace, whether its tables' contents count) for every namespace watched."""
    import torch.nn.functional as F  # noqa: N812 - PyTorch's own spelling

    spaces: list[tuple[str, Any, bool]] = [
        ("torch.Tensor", torch.Tensor, True), ("torch.testing", torch.testing, True),
        ("torch.nn.functional", F, True), ("torch", torch, True), ("torch.nn", torch.nn, True)]
    modules = [(m, True) for name, m in list(sys.modules.items())
               if isinstance(m, types.ModuleType) and (name == _OWN_MODULES[0] or name.startswith(_OWN_MODULES[1:])
                                                       or name.startswith(_TORCH_MODULES))]
    # The standard library's containers the checks count with (Counter.items rebound to return nothing
    # emptied the op recorder's count: a red-team review, 2026-12-01).
    modules.append((collections, True))
    modules += [(o, True) for o in extra if isinstance(o, types.ModuleType)]
    modules += [(o, False) for o in rebound_only if isinstance(o, types.ModuleType)]
    for m, contents in modules:
        spaces.append((m.__name__, m, contents))
        # ... and the classes it defines, by their own dicts (Verdict's methods, the reference's Model)
        spaces += [(f"{m.__name__}.{k}", v, contents) for k, v in list(vars(m).items())
                   if isinstance(v, type) and v.__module__ == m.__name__]
    return spaces


def _entries(label: str, owner: Any, contents: bool = True) -> dict[str, Any]:
    """A namespace's names -> what they hold: the object, or for a constant table (an UPPERCASE set,
    dict or tuple of a module) a copy of its contents, so an update in place shows too (where
    `contents`; else the table object itself: rebinding the name counts, filling it does not). A
    module's lowercase non-callable globals are its state (offthread's `_installed`), not compared."""
    out: dict[str, Any] = {}
    if isinstance(owner, type):
        for name in dir(owner):
            out[f"{label}.{name}"] = _get(owner, name)
        return out
    for name, value in list(vars(owner).items()):
        key = f"{label}.{name}"
        constant = name.lstrip("_")[:1].isupper()
        sealed = getattr(type(value), "SEALED", None) if contents and not constant else None
        if isinstance(sealed, tuple):
            # A watch's state object: its configuration, set before the candidate's code runs, is
            # compared by contents (a red-team candidate, 2026-12-01, reached call_watch's and the
            # audit hook's through a computed name and emptied them); its running record is not.
            out[key] = value
            out[f"{key}#sealed"] = _Contents(tuple((f, _freeze(getattr(value, f, _MISSING))) for f in sealed))
        elif constant and not contents:
            out[key] = value
        elif constant and isinstance(value, set | frozenset):
            out[key] = _Contents(frozenset(value))
        elif constant and isinstance(value, dict):
            out[key] = _Contents(tuple(value.items()))
        elif constant or callable(value) or isinstance(value, types.ModuleType):
            out[key] = value
    return out


def _freeze(value: Any, depth: int = 0) -> Any:
    """A comparable copy of a watch's configuration: containers and dataclasses by their contents,
    anything else by identity."""
    if depth > 6:
        return ("id", id(value))
    if isinstance(value, str | bytes | int | float | bool | types.CodeType) or value is None or value is _MISSING:
        return value
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v, depth + 1)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_freeze(v, depth + 1) for v in value))
    if isinstance(value, set | frozenset):
        return ("set", frozenset(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), tuple((f.name, _freeze(getattr(value, f.name, _MISSING), depth + 1))
                                   for f in dataclasses.fields(value)))
    return ("id", id(value))


class _Contents:
    """A table's contents at the snapshot: equal, not identical, is unchanged."""

    def __init__(self, items: Any):
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Contents) and self.items == other.items

    __hash__ = None  # type: ignore[assignment]


def snapshot(extra: tuple[Any, ...] = (), rebound_only: tuple[Any, ...] = ()) -> dict[str, Any]:
    """`owner.attr` -> the object there now (class attributes read from the class's own dict, so a
    replacement on the class itself is seen even where a base defines the original), for the timing
    primitives and for every name of the namespaces the checks use (`extra`: the reference's module).
    `rebound_only`: modules watched for rebinding alone, whose tables are the module's own running
    state (torch.profiler's set of warnings shown, which torch fills as the checker profiles)."""
    # How to look again, bound now: a candidate that rebinds this module's functions changes nothing.
    again = (_look, _from, _WATCHED, _namespaces, _entries, _get, (extra, rebound_only), _torch_wrapper)
    return {**_look(again), _AGAIN: again}


def _look(again: tuple[Any, ...]) -> dict[str, Any]:
    _, _, watched, namespaces, entries, get, (extra, rebound_only), _ = again
    out: dict[str, Any] = {}
    for label, owner, names in watched:
        for name in names:
            out[f"{label}.{name}"] = get(owner, name)
    for label, owner, contents in namespaces(extra, rebound_only):
        for key, value in entries(label, owner, contents).items():
            out.setdefault(key, value)
    return out


def changed(before: dict[str, Any], *, except_from: tuple[str, ...] = ()) -> list[str]:
    """The names of `before` now bound to another object (or, for a table, holding other contents);
    removed ones count, names added since do not (PyTorch adds attributes as it loads).

    `except_from`: packages whose own objects may have been put there meanwhile (torch.compile runs
    during timing, and PyTorch may patch itself): those are not the candidate's doing. The timing
    does not depend on this check (it bound its primitives before the candidate was imported); the
    check says that a candidate tried."""
    again = before[_AGAIN]
    look, from_, wrapper = again[0], again[1], again[7]
    now = look(again)
    names = []
    for k, old in before.items():
        if k == _AGAIN:
            continue
        new = now.get(k, _MISSING)
        same = old == new if isinstance(old, _Contents) else old is new
        if not same and not from_(new, except_from) and not wrapper(new, old):
            names.append(k)
    return sorted(names)


def _torch_wrapper(new: Any, old: Any) -> bool:
    """PyTorch wrapping its own function as it loads more of itself (importing torch._dynamo puts
    `torch.manual_seed` behind a wrapper of the same function): `new` wraps `old` (its __wrapped__
    chain reaches it) and its code lies in torch's own files. functools.wraps copies __module__ and
    the name, so the code's file is what tells PyTorch's wrapper from a candidate's."""

    # Plain functions only, read through their type's own attributes: a candidate's object could
    # answer any attribute (a __getattr__) with anything.
    if type(new) is not types.FunctionType or not str(new.__code__.co_filename).startswith(
            os.path.dirname(torch.__file__) + os.sep):
        return False
    seen, f = 0, new
    while seen < 8 and type(f) is types.FunctionType and "__wrapped__" in f.__dict__:
        f = f.__dict__["__wrapped__"]
        if f is old:
            return True
        seen += 1
    return False


_AGAIN = "\0again"


def _from(value: Any, packages: tuple[str, ...]) -> bool:
    """Whether `value` is one of these packages' own: a Python function whose code lies in their
    files, or a C function of one of their modules. Not by its `__module__`, which anyone can set
    (a candidate's replacement of torch.cuda.current_stream named "torch.cuda" went unseen)."""
    if not packages:
        return False
    roots = []
    for name in packages:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None) if module is not None else None
        if isinstance(file, str):
            roots.append(os.path.dirname(os.path.realpath(file)) + os.sep)
    if type(value) is types.FunctionType:
        file = os.path.realpath(value.__code__.co_filename)
    elif type(value) is types.BuiltinFunctionType and isinstance(value.__self__, types.ModuleType):
        file = getattr(value.__self__, "__file__", None) or ""
        file = os.path.realpath(file) if file else ""
    else:
        return False
    return bool(file) and file.startswith(tuple(roots))


_MISSING = object()


def _get(owner: Any, name: str) -> Any:
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return _MISSING
    return getattr(owner, name, _MISSING)
