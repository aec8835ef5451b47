"""Calls the candidate's code makes that hide PyTorch's work from the op recorder, or run the reference.

The op recorder (dynamic_check.OpRecorder) is a TorchDispatchMode: it sees every aten op that
reaches the Python dispatch key. PyTorch has its own ways past that key, and a candidate can call
them: pop the modes (`_disable_current_modes`, `_pop_mode_temporarily`), exclude the Python key
(`no_dispatch`, which is `torch._C._DisableTorchDispatch`: seen by its effect, the key excluded
while the candidate's code calls on),
`OpOverload.redispatch` to a backend key, run one key's kernel (`_SafeKernelFunction.call_boxed`,
a red-team review of 2026-12-05), or register a Python kernel for an aten op
(`torch.library.Library(...).impl`). And a candidate that finds the reference's module can run its
forward. A red-team review (2026-11-26) had each accepted on CPU. While the candidate's code runs
(import, construction, the checked forwards; not the timed ones), a profile function sees every
Python call: these functions called from the candidate's own files (PyTorch calls `redispatch` for
a custom op itself), and any call into the reference's file, become findings. Removing the profile
function raises an audit event, which counts as well.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, ClassVar

from stitchcuda.agents.verify.private_log import private_log


def _hiding_functions() -> dict[CodeType, str]:
    import ctypes

    import torch
    import torch.library
    import torch.utils._mode_utils as mode_utils
    import torch.utils._python_dispatch as python_dispatch

    found: dict[CodeType, str] = {}
    named = [
        ("torch.utils._python_dispatch._disable_current_modes", getattr(python_dispatch, "_disable_current_modes", None)),
        ("torch.utils._python_dispatch._pop_mode_temporarily", getattr(python_dispatch, "_pop_mode_temporarily", None)),
        ("torch.utils._python_dispatch._pop_mode", getattr(python_dispatch, "_pop_mode", None)),
        ("torch.utils._mode_utils.no_dispatch", getattr(mode_utils, "no_dispatch", None)),
        ("torch._ops.OpOverload.redispatch", getattr(torch._ops.OpOverload, "redispatch", None)),
        ("torch.library.Library", getattr(torch.library.Library, "__init__", None)),
        ("torch.library.Library.impl", getattr(torch.library.Library, "impl", None)),
        ("torch.library.impl", getattr(torch.library, "impl", None)),
        ("torch.library.register_kernel", getattr(torch.library, "register_kernel", None)),
        # torch.library's way to torch._C._dispatch_get_computed_kernel_for_dispatch_key (its caller
        # torch/library.py, not the candidate: the wrapped getter would not name it); see _KERNEL_HANDOUTS.
        ("torch.library.get_kernel", getattr(torch.library, "get_kernel", None)),
        # A Python function native code can call back, on a thread of its own (an OpenMP team's):
        # no recorder or profiler sees what runs there (a red-team review, 2026-12-01).
        ("ctypes.CFUNCTYPE", getattr(ctypes, "CFUNCTYPE", None)),
        ("ctypes.PYFUNCTYPE", getattr(ctypes, "PYFUNCTYPE", None)),
    ]
    for name, fn in named:
        fn = getattr(fn, "__wrapped__", fn)  # a contextmanager's generator function
        # functools.singledispatch and overloads: the function registered for each type too
        for f in [fn, *getattr(getattr(fn, "registry", None), "values", lambda: [])()]:
            code = getattr(getattr(f, "__wrapped__", f), "__code__", None)
            if isinstance(code, CodeType):
                found[code] = name
    return found


def _hiding_builtins() -> dict[int, str]:
    """The C functions under those: the dispatch mode stack itself, called directly (a red-team
    candidate, 2026-11-30, popped the op recorder with torch._C._pop_torch_dispatch_stack)."""
    import torch

    names = ("_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_set_dispatch_mode",
             "_unset_dispatch_mode", "_disabled_torch_dispatch_impl")
    found = {id(fn): f"torch._C.{n}" for n in names if (fn := getattr(torch._C, n, None)) is not None}
    # The switch of the profiler's op recording (RecordFunction), thread-local: off inside forward, the
    # blind check's witness recorded none of its ops (a red-team review, 2026-12-01).
    switch = getattr(getattr(torch._C, "_autograd", None), "_enable_record_function", None)
    if switch is not None:
        found[id(switch)] = "torch._C._autograd._enable_record_function"
    return found


# The C switches of the op recorder's and the profiler's view (the dispatch mode stack, RecordFunction),
# by module and name. A profile function sees a C function called from Python code, not one called
# by another C function: `list(map(torch._C._pop_torch_dispatch_stack, ...))` ran no event, and a
# red-team candidate (2026-12-01) popped the recorder and switched RecordFunction off that way.
# install() puts a Python function in their place wherever a module holds them, which sees its
# caller however it was reached.
# A second review the same day went past them with the profiler's own switches (collection toggled off
# inside forward, which the blind witness records with). ATen's call below the Python key
# (_disabled_torch_dispatch_impl) stays a C function, named at its calls (_hiding_builtins): torch
# compares Tensor.__torch_dispatch__ with it by identity.
_SWITCHES = (("torch._C", "_get_operation_overload"),  # (an operator's op_dk: see _wrap_dispatch_entries)
             ("torch._C", "_pop_torch_dispatch_stack"), ("torch._C", "_push_on_torch_dispatch_stack"),
             ("torch._C", "_set_dispatch_mode"), ("torch._C", "_unset_dispatch_mode"),
             # The getter of one backend key's kernel (a _SafeKernelFunction, see _KERNEL_HANDOUTS),
             # named where the candidate fetches it, at import as often as not.
             ("torch._C", "_dispatch_get_computed_kernel_for_dispatch_key"),
             # The thread's excluded keys set by hand, what the guards below do: the key's exclusion is
             # seen at the candidate's calls after it, but not at calls chained in C (itertools.starmap
             # over operator.call: setter, operator, setter) with no profile event in between.
             ("torch._C", "_dispatch_tls_set_dispatch_key_excluded"),
             # The library object whose impl/fallback register kernels: torch.library.Library is
             # watched, the C constructor under it was not.
             ("torch._C", "_dispatch_library"),
             ("torch._C._autograd", "_enable_record_function"), ("torch._C._autograd", "_toggle_collection_dynamic"),
             ("torch._C._autograd", "_disable_profiler"), ("torch._C._autograd", "_prepare_profiler"),
             ("torch._C._autograd", "_enable_profiler"), ("torch._C._autograd", "_clear_callbacks"))
# The guards that take the Python dispatch key out of the dispatch (what `no_dispatch` is): C types,
# whose construction and `with` raise no profile event, and operators inside them none either.
# ExcludeDispatchKeyGuard, unprefixed, is a second class of its own, not `_ExcludeDispatchKeyGuard`
# (torch 2.13), and excludes the Python key alike.
_GUARDS = ("_DisableTorchDispatch", "_ExcludeDispatchKeyGuard", "ExcludeDispatchKeyGuard", "_ForceDispatchKeyGuard",
           "_SetExcludeDispatchKeyGuard")

# The pybind methods that run an operator's kernel for the key (or key set) their caller names, below
# the dispatcher's Python key, each wrapped on its class, so however the candidate came by the object
# (from the getter, torch.library.get_kernel, an operator's _handle, a `_SafeKernelFunction.op_handle`)
# its call is watched. A red-team review (2026-12-05) had aten::addmm's CPU kernel do nn.Linear's work
# through `_SafeKernelFunction.call_boxed`: no Python key (the op recorder saw only the expand and
# copy_ the kernel dispatches itself) and no RecordFunction (no profiler event). The rest of the
# family goes in at the dispatcher's top, Python key and all, and is left alone: `_dispatch_call_boxed`
# and `_jit_get_operation`'s functions (both seen by a dispatch mode and the profiler, checked on torch
# 2.13), `_dispatch_find_schema_or_throw` (a handle, whose one running method is here) and the
# `_dispatch_has_*`/`_dispatch_dump*` queries.
_KERNEL_HANDOUTS = (("_DispatchOperatorHandle", "redispatch_boxed"), ("_SafeKernelFunction", "call_boxed"))


_SIGNALS = ("signal", "setitimer", "set_wakeup_fd", "raise_signal", "pthread_kill", "alarm", "siginterrupt")


def _switch(original: Any, name: str, code: str = "hidden-dispatch",
            why: str = "PyTorch work past the op recorder") -> Any:
    # The original is a keyword default: reading a function's defaults is refused in the candidate's
    # windows (audit.py), where a closure's cell is not (the second review called the originals from
    # the first version's closures).
    def switch(*args: Any, _sc_original: Any = original, **kwargs: Any) -> Any:
        if _state.phase and _mine(_past_stdlib(sys._getframe(1))):
            _record(code, f"calls {name}: {why}")
        return _sc_original(*args, **kwargs)

    switch.__name__ = switch.__qualname__ = getattr(original, "__name__", name)
    switch.__doc__ = getattr(original, "__doc__", None)
    return switch


def _guard(original: type, name: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - the guard's own
        if _state.phase and _mine(_past_stdlib(sys._getframe(1))):
            _record("hidden-dispatch", f"makes {name}: PyTorch work past the op recorder")
        original.__init__(self, *args, **kwargs)

    guard = type(original.__name__, (original,), {"__init__": __init__, "__module__": original.__module__,
                                                   "__qualname__": original.__qualname__, "_sc_switch": True})
    return guard


def _wrap_switches() -> None:
    """Each switch replaced by its watching wrapper in every loaded module that holds it (torch._C,
    and torch.utils._python_dispatch's own imports of it); modules loaded later import the wrapper."""
    import torch

    originals: dict[int, tuple[Any, Any]] = {}
    for module_name, attr in _SWITCHES:
        owner: Any = torch  # by attributes: torch._C._autograd is no importable module
        for part in module_name.split(".")[1:]:
            owner = getattr(owner, part, None)
        fn = getattr(owner, attr, None)
        if fn is None or getattr(fn, "_sc_switch", False):
            continue  # absent in this torch, or wrapped already (a second install)
        wrapper = _switch(fn, f"{module_name}.{attr}")
        wrapper._sc_switch = True  # type: ignore[attr-defined]
        originals[id(fn)] = (fn, wrapper)
    import _signal  # signal.py's functions call these (a second review installed a handler through them)

    for attr in _SIGNALS:
        fn = getattr(_signal, attr, None)
        if fn is not None and not getattr(fn, "_sc_switch", False):
            wrapper = _switch(fn, f"signal.{attr}", SIGNAL_CODE,
                              "a signal handler runs inside the Verifier's code, handed its frames")
            wrapper._sc_switch = True  # type: ignore[attr-defined]
            originals[id(fn)] = (fn, wrapper)
    for attr in _GUARDS:
        cls = getattr(torch._C, attr, None)
        if isinstance(cls, type) and not getattr(cls, "_sc_switch", False):
            try:
                originals[id(cls)] = (cls, _guard(cls, f"torch._C.{attr}"))
            except TypeError:
                pass  # a type that takes no subclass: its effect is still checked at calls
    if not originals:
        return
    spaces = [*sys.modules.values(), torch._C, getattr(torch._C, "_autograd", None)]
    for module in spaces:
        space = getattr(module, "__dict__", None)
        if not isinstance(space, dict):
            continue
        for key, value in list(space.items()):
            hit = originals.get(id(value))
            if hit is not None and hit[0] is value:
                try:
                    setattr(module, key, hit[1])
                except (AttributeError, TypeError):
                    pass


def _wrap_dispatch_entries() -> None:
    """PyTorch's own entries below the dispatch key their caller names, watched like the switches:
    the pybind methods of _KERNEL_HANDOUTS (`redispatch_boxed` is what `OpOverload.redispatch`
    calls) and each operator's `_op_dk`, which runs its kernel for one named key. Called with the
    backend's key, each runs ATen's kernel with no Python key (no op recorder) and no RecordFunction
    (no profiler event): red-team reviews (2026-12-02, 2026-12-05) had PyTorch do a forward, a matmul
    among it, through each. The methods are replaced on their classes; `_op_dk` in every operator made
    so far, and in each made later (OpOverload.__init__ wrapped), so the original is nowhere the
    candidate can read it."""
    import torch

    for cls_name, attr in _KERNEL_HANDOUTS:
        cls = getattr(torch._C, cls_name, None)
        fn = getattr(cls, attr, None) if cls is not None else None
        if fn is None or getattr(fn, "_sc_switch", False):
            continue  # absent in this torch, or wrapped already (a second install)
        wrapper = _switch(fn, f"torch._C.{cls_name}.{attr}")
        wrapper._sc_switch = True  # type: ignore[attr-defined]
        with contextlib.suppress(AttributeError, TypeError):
            setattr(cls, attr, wrapper)
    overload = getattr(torch._ops, "OpOverload", None)
    init = getattr(overload, "__init__", None)
    if overload is None or init is None or getattr(init, "_sc_switch", False):
        return

    def watched(op: Any) -> None:
        dk = op.__dict__.get("_op_dk")
        if dk is not None and not getattr(dk, "_sc_switch", False):
            wrapped = _switch(dk, "OpOverload._op_dk")
            wrapped._sc_switch = True  # type: ignore[attr-defined]
            op.__dict__["_op_dk"] = wrapped

    def __init__(self: Any, *args: Any, _sc_original: Any = init, _sc_watched: Any = watched,  # noqa: N807
                 **kwargs: Any) -> None:
        _sc_original(self, *args, **kwargs)
        _sc_watched(self)

    __init__._sc_switch = True  # type: ignore[attr-defined]
    overload.__init__ = __init__
    for namespace in list(getattr(torch.ops, "__dict__", {}).values()):
        for packet in list(getattr(namespace, "__dict__", {}).values()):
            for op in list(getattr(packet, "__dict__", {}).values()):
                if isinstance(op, overload):
                    watched(op)


def _signal_builtins() -> dict[int, str]:
    """What installs a signal handler, or raises a signal for one. A handler is handed the frame it
    interrupted, the Verifier's own, and walked `f_back` to the op recorder and the witness's profile
    and emptied them of the forward's ops (a red-team review, 2026-12-01): no audit event names that
    walk. A candidate's kernels need none of these."""
    return {id(fn): f"signal.{n}" for n in _SIGNALS if (fn := getattr(signal, n, None)) is not None}


SIGNAL_CODE = "signal-handler"


def _candidate_handlers() -> list[str]:
    """The signals whose handler is the candidate's code now (installed however it was called)."""
    found = []
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        code = getattr(getattr(handler, "__func__", handler), "__code__", None)
        if code is not None and code.co_filename.startswith(_state.candidate_dirs):
            found.append(getattr(sig, "name", str(sig)))
    return found


@dataclass
class _State:
    # Set by install() before the candidate's code runs; tamper.py compares them after it has.
    SEALED: ClassVar[tuple[str, ...]] = ("hiding", "hiding_builtins", "signal_builtins", "candidate_dirs",
                                         "reference_files")
    hiding: dict[CodeType, str] = field(default_factory=dict)
    hiding_builtins: dict[int, str] = field(default_factory=dict)
    signal_builtins: dict[int, str] = field(default_factory=dict)
    candidate_dirs: tuple[str, ...] = ()
    reference_files: frozenset[str] = frozenset()
    phase: str = ""  # "" while not watching
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # (code, what, phase)


_state = _State()


def install(candidate_dir: str | Path, reference: str | Path) -> None:
    """Before the candidate is imported: what to look for, and where its code and the reference's live."""
    _state.hiding = _hiding_functions()
    _state.hiding_builtins = _hiding_builtins()  # (the C functions, before _wrap_switches replaces them)
    _wrap_switches()
    _wrap_dispatch_entries()
    _state.signal_builtins = _signal_builtins()
    _state.candidate_dirs = (str(Path(candidate_dir)) + "/", str(Path(candidate_dir).resolve()) + "/")
    _state.reference_files = frozenset({str(reference), str(Path(reference).resolve())})
    sys.addaudithook(_audit)


def _audit(event: str, args: tuple) -> None:
    if _state.phase and event in ("sys.setprofile", "sys.settrace"):
        _record("hidden-dispatch", f"{event}: the candidate replaced the profile function that watches its calls")


# The record the checks read: private, append-only (private_log.py); `_state.seen` stays for reading.
_log_add, _log_entries = private_log()


def _record(code: str, what: str) -> None:
    item = (code, what, _state.phase)
    if item not in _state.seen:
        _state.seen.append(item)
    _log_add(item)


def _mine(frame: FrameType | None) -> bool:
    return frame is not None and frame.f_code.co_filename.startswith(_state.candidate_dirs)


# The standard library's frames between a caller and what it calls: `with f():` enters through
# contextlib, ExitStack.enter_context through two of its frames, functools.partial and friends.
# signal.py too: its `signal()` calls _signal's, watched, on the candidate's behalf.
_BETWEEN = frozenset({contextlib.__file__, functools.__file__, operator.__file__, signal.__file__})


def _past_stdlib(frame: FrameType | None) -> FrameType | None:
    while frame is not None and frame.f_code.co_filename in _BETWEEN:
        frame = frame.f_back
    return frame


_KEY_EXCLUDED = ("calls PyTorch with its Python dispatch key excluded (torch._C._DisableTorchDispatch or a "
                 "dispatch key guard): work past the op recorder")


def _python_key_excluded() -> bool:
    import torch

    return bool(torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python))


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    if event == "c_call":
        # torch._C._DisableTorchDispatch (what no_dispatch is) and the key guards are C types, whose
        # construction no profile event shows; what they do shows: the Python key excluded while
        # the candidate's own code calls on.
        if _mine(frame) and _python_key_excluded():
            _record("hidden-dispatch", _KEY_EXCLUDED)
        name = _state.hiding_builtins.get(id(arg))
        if name is not None and _mine(_past_stdlib(frame)):
            _record("hidden-dispatch", f"calls {name}: PyTorch work past the op recorder")
        name = _state.signal_builtins.get(id(arg))
        if name is not None and _mine(_past_stdlib(frame)):
            _record(SIGNAL_CODE, f"calls {name}: a signal handler runs inside the Verifier's code, handed its frames")
        return
    if event != "call":
        return
    if _mine(frame.f_back) and _python_key_excluded():
        _record("hidden-dispatch", _KEY_EXCLUDED)
    code = frame.f_code
    if code.co_filename in _state.reference_files:
        _record("calls-reference", f"runs the reference's own code ({code.co_name})")
        return
    name = _state.hiding.get(code)
    if name is None:
        return
    if _mine(_past_stdlib(frame.f_back)):
        _record("hidden-dispatch", f"calls {name}: PyTorch work past the op recorder")


@contextlib.contextmanager
def watching(phase: str) -> Iterator[None]:
    """Watch the candidate's calls for the block (nested blocks keep the outer phase)."""
    if _state.phase or not _state.candidate_dirs:
        yield
        return
    previous = sys.getprofile()
    sys.setprofile(_profile)
    _state.phase = phase
    try:
        yield
    finally:
        # A handler installed where no call event showed it (from C: map, a native library): its
        # standing is what counts, at the end of every window.
        for sig in _candidate_handlers():
            _record(SIGNAL_CODE, f"left its own handler on {sig}: a signal handler runs inside the Verifier's code")
        _state.phase = ""
        sys.setprofile(previous)


def seen() -> list[tuple[str, str, str]]:
    """(finding code, what was called, during which phase), each once, from the private record."""
    return list(dict.fromkeys(_log_entries()))
