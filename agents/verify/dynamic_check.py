"""Dynamic anti-hacking: what a candidate actually does while its forward runs."""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

# Bound as this module is imported (torch has loaded torch.profiler by then), before any candidate
# runs: the stream check and the timing floor profile after the timed calls, and a name the candidate
# rebinds in torch.profiler meanwhile does not reach them (tamper.py watches this module's names).
from torch.profiler import ProfilerActivity as _ProfilerActivity
from torch.profiler import profile as _profile
from torch.utils._python_dispatch import TorchDispatchMode

from stitchcuda.agents.verify.private_log import private_log
from stitchcuda.agents.verify.torch_ops import (
    BERNOULLI_FILL,
    BERNOULLI_OF_TENSOR,
    DROPOUT_MASK,
    is_compute_aten,
)
from stitchcuda.types import Finding

# Every op each recorder saw, as (recorder, name): append-only, held only by the keyword defaults of
# OpRecorder's methods (private_log.py). `ops`, the counts the recorder keeps on itself, is reachable
# from the candidate's forward (the dispatch-mode stack holds the recorder): a candidate computed
# with PyTorch and put the counts back after, which only the blind check's witness caught, and one
# that told the witness's process from the worker's did its PyTorch work in the worker alone (a
# red-team review, 2026-12-02). The record keeps what was dispatched; counts that differ from it
# are a finding (`recorded_ops`).
_RECORD_ADD, _RECORD_ENTRIES = private_log()


class OpRecorder(TorchDispatchMode):
    """Records every aten op dispatched, from Python or from C++ (an extension calling at::matmul
    goes through the dispatcher too), by overload-packet name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        # Copies of GPU data to the host (.cpu(), .item(), .tolist(), copy_ into a CPU tensor):
        # what lets a forward choose its outputs by what it reads of its inputs (see host_read_finding).
        self.host_reads = 0
        # Dropout masks drawn (DROPOUT_MASK) in a way that launches ATen's dropout kernel once each
        # on a GPU: what torch_launched may let through of that kernel (see _launches_dropout).
        self.dropout_launches = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None, *, _sc_add=_RECORD_ADD):
        kwargs = kwargs or {}
        if types:
            # A tensor subclass with a __torch_dispatch__ of its own among the arguments (plain tensors
            # and Parameters give no types): what its handler does runs below this mode, unseen, so
            # the op counts as compute (a red-team review: a handler assigned, not def'd, ran ATen's
            # relu under a recorded clone).
            self.ops[name := f"tensor_subclass::{func.overloadpacket.__name__}"] += 1
            _sc_add((self, name))
            return func(*args, **kwargs)
        if func.namespace not in ("aten", "prims", "prim"):
            # A custom op's implementation runs below this mode, unseen: where it is Python (a
            # torch.library.custom_op, as the built-in coder's ModelNew defines), run that function
            # under the recorder so every op inside is recorded; where it cannot be seen, the op
            # itself counts as compute (it may be PyTorch's work behind a name).
            impl = _python_impl(func, args)
            if impl is not None:
                with self:
                    return impl(*args, **kwargs)
            self.ops[name := f"{func.namespace}::{func.overloadpacket.__name__}"] += 1
            _sc_add((self, name))
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name == "native_dropout" and _all_ones(x := args[0] if args else kwargs.get("input")):
            name = DROPOUT_MASK  # a mask drawn, not the dropout of anything computed
            self.dropout_launches += _launches_dropout(x, args, kwargs)
        elif name in ("bernoulli", "bernoulli_"):
            # drawn with a number for p, or against values the forward computed
            name = BERNOULLI_FILL if func._overloadname in _NUMBER_P else BERNOULLI_OF_TENSOR
        op = name
        if name in _CASTS and _truncates(name, args, kwargs):
            name = TRUNCATING_CAST
        self.ops[name] += 1
        _sc_add((self, name))
        out = func(*args, **kwargs)
        if op in _HOST_READ_OPS and reads_device_to_host(op, args, out):
            self.host_reads += 1
        return out

    @property
    def compute_ops(self) -> dict[str, int]:
        return {k: v for k, v in self.ops.items() if is_compute_aten(k)}

    def recorded_ops(self, *, _sc_entries=_RECORD_ENTRIES) -> tuple[Counter[str], Finding | None]:
        """What this recorder saw dispatched, from the private record, and a finding where its own
        counts (`ops`) say otherwise: changed by the code it watched."""
        seen = Counter(name for who, name in _sc_entries() if who is self)
        if seen == +self.ops:
            return seen, None
        return seen, Finding("hidden-dispatch", "the op recorder's counts were changed while the candidate ran "
                             f"(it recorded {sum(seen.values())} ops, its counts say {sum(self.ops.values())}): "
                             "PyTorch work hidden from the check")


def _launches_dropout(x: torch.Tensor, args: Any, kwargs: dict[str, Any]) -> int:
    """1 where native_dropout(x, p, train) runs ATen's dropout kernel on a GPU: x on one, with
    elements, train True and 0 < p < 1 (otherwise it clones, fills or returns at once). A draw that
    launches nothing must not make room for a dropout kernel from elsewhere (a graph replayed: the
    red-team review of 2026-11-28 drew masks of CPU ones, empty tensors and train=False for that)."""
    p = args[1] if len(args) > 1 else kwargs.get("p")
    train = args[2] if len(args) > 2 else kwargs.get("train")
    return int(x.device.type not in ("cpu", "meta") and x.numel() > 0 and train is True
               and isinstance(p, float | int) and 0 < p < 1)


# The bernoulli overloads whose probability is a number (by overload, not by the arguments: dispatch
# leaves out a p equal to the schema's default 0.5). bernoulli.default reads its self's values as
# p, the Tensor overloads their p's.
_NUMBER_P = frozenset({"p", "float", "float_out"})


def _all_ones(t: Any) -> bool:
    """Whether `t` is a tensor holding only ones (this mode is off while its own ops run)."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and bool((t == 1).all())


# A copy from a floating dtype into an integral one (or bool) rounds toward zero and saturates: arithmetic,
# not data movement (a red-team round, 2026-12-06: torch.trunc as copy_ into an int64 tensor and back).
# Filed under this name, which is no allowed op. Casts between floating dtypes, and from integers to
# floats, stay copies (the mixed-precision rung's operands).
TRUNCATING_CAST = "copy(floating -> integral)"
_CASTS = frozenset({"copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize"})


def _truncates(name: str, args: Any, kwargs: dict[str, Any]) -> bool:
    if name == "copy_" or name.startswith("_copy_from"):
        dst, src = (args[0], args[1]) if len(args) > 1 else (None, None)
        if name.startswith("_copy_from"):
            dst, src = src, dst  # _copy_from(self, dst)
        to = dst.dtype if isinstance(dst, torch.Tensor) else None
    else:
        src = args[0] if args else None
        to = kwargs.get("dtype") or next((a for a in args[1:] if isinstance(a, torch.dtype)), None)
    if not isinstance(src, torch.Tensor) or not isinstance(to, torch.dtype):
        return False
    return (src.is_floating_point() or src.is_complex()) and not (to.is_floating_point or to.is_complex)


_HOST_READ_OPS = frozenset({"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize", "_local_scalar_dense"})


def reads_device_to_host(name: str, args: Any, out: Any) -> bool:
    """Whether an op (one of _HOST_READ_OPS) brought data from a device to the CPU: its source on a
    device, and its result (or, for copy_, its destination) on the CPU; `.item()` has no tensor
    result."""
    def on_device(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type not in ("cpu", "meta")

    if name == "_local_scalar_dense":
        # .item() hands a value to Python wherever the tensor is: on the CPU, a forward of .item()
        # reads and Python arithmetic computed a linear layer unseen (a red-team round, 2026-12-06).
        # A CPU integer's (a size, a count, an index) is no value of the computation.
        t = args[0] if args else None
        return isinstance(t, torch.Tensor) and (on_device(t) or (t.device.type == "cpu"
                                                                 and (t.is_floating_point() or t.is_complex())))
    if name == "copy_":
        return len(args) > 1 and on_device(args[1]) and isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu"
    src = args[0] if args else None
    return on_device(src) and isinstance(out, torch.Tensor) and out.device.type == "cpu"


def host_read_finding(candidate_reads: int, reference_reads: int) -> Finding | None:
    """A candidate whose checked forwards copied GPU data to the host where the reference's did not:
    a forward that reads its inputs on the host can pick its outputs by what it sees (keep them per
    input contents, skip work for inputs it recognises), which no comparison against the reference
    on those inputs can tell from doing the work. (Found by a red-team review: outputs kept per the
    inputs' bytes, read through .cpu() and ctypes, passed every other check.)"""
    if candidate_reads == 0 or reference_reads > 0:
        return None
    return Finding(
        "host-read",
        f"forward read tensor data on the host {candidate_reads} time(s) (.item() on any device; .cpu(), "
        ".tolist() or a copy into a CPU tensor from a GPU), which the reference never does: outputs chosen or "
        "computed by what the host reads of the inputs escape the correctness check",
        data={"candidate_reads": candidate_reads},
    )


def _python_impl(func: Any, args: Any) -> Callable[..., Any] | None:
    """The Python function behind a torch.library.custom_op, for the device its tensors are on."""
    try:
        from torch._library.custom_ops import _maybe_get_opdef

        opdef = _maybe_get_opdef(func)
    except (ImportError, AssertionError, AttributeError):
        return None
    if opdef is None:
        return None
    flat = flatten_outputs(list(args))
    device = next((t.device.type for t in flat if isinstance(t, torch.Tensor)), None)
    backends = getattr(opdef, "_backend_fns", {}) or {}
    return backends.get(device) or getattr(opdef, "_init_fn", None)


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Deterministic mode, in which torch.empty and friends fill new memory with NaN (integers with
    their max): an output element the candidate never writes cannot pass by luck.

    Set through torch._C where it exists: the public setter imports torch._inductor (2 s of every
    worker's life) only to mirror the flag into inductor's config."""
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    if setter is not None:
        setter(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        if setter is not None:
            setter(before[0], warn_only=before[1])
        else:
            torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def trace_ops(fn: Callable[[], Any]) -> tuple[Any, Counter[str], int]:
    """fn's result, the aten ops it dispatched, and how many of them copied GPU data to the host."""
    with OpRecorder() as rec:
        out = fn()
    return out, rec.recorded_ops()[0], rec.host_reads


def torch_compute_finding(ops: Counter[str], when: str = "") -> Finding | None:
    compute = {k: v for k, v in ops.items() if is_compute_aten(k)}
    if not compute:
        return None
    listed = ", ".join(f"{k if '::' in k else 'aten.' + k} x{v}" for k, v in sorted(compute.items(), key=lambda kv: -kv[1]))
    return Finding(
        "torch-compute-in-forward",
        f"forward ran PyTorch compute ops{when}: {listed}",
        data={"ops": compute},
    )


def _items(out: Any) -> Any:
    """A tuple's or a list's items through tuple's and list's own iteration, never a subclass's; None
    for anything else (by the type itself: a `__class__` of the candidate's cannot claim to be one)."""
    kind = type(out)
    if issubclass(kind, tuple):
        return tuple.__iter__(out)
    if issubclass(kind, list):
        return list.__iter__(out)
    return None


def mode_stacks() -> tuple[int, int]:
    """The depths of torch's function-mode and dispatch-mode stacks (compared around a forward)."""
    return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()


def flatten_outputs(out: Any) -> list[Any]:
    """forward's result as its leaves. A container subclass's `__iter__` or `__getitem__` is the
    candidate's code and ran wherever the outputs were read, after the op recorder and the profiled
    spans had closed: a list subclass computed its result with PyTorch in `__iter__` and was accepted
    (a red-team review, 2026-12-01). So only the items stored in it count."""
    items = _items(out)
    if items is None:
        return [out]
    return [o for item in items for o in flatten_outputs(item)]


# Leaves forward may return besides tensors (compared with ==).
_PLAIN_LEAVES = (int, float, bool, complex, str, type(None))


def type_name(kind: type) -> str:
    """A class's name as `type` keeps it (a metaclass of the candidate's cannot answer for it)."""
    return type.__dict__["__qualname__"].__get__(kind, type)


def foreign_leaf(o: Any) -> bool:
    """Whether a leaf (flatten_outputs) is neither a plain tensor nor a plain value: an object whose
    methods are the candidate's and run when the outputs are read, compared, copied or saved (a leaf's
    `__eq__` can say it equals the reference's value; its `__reduce_ex__` runs as the blind check's
    witness saves it). Tensor subclasses are foreign too (output_type_findings names them)."""
    return type(o) is not torch.Tensor and type(o) not in _PLAIN_LEAVES


def odd_leaves(outs: list[Any]) -> list[str]:
    """The names of the foreign leaves other than tensor subclasses (those: output_type_findings).
    Containers are not here: their items are read without their methods."""
    return sorted({type_name(type(o)) for o in outs if foreign_leaf(o) and not issubclass(type(o), torch.Tensor)})


# What a container subclass may not redefine: how its items are read, counted, compared or pickled.
# (A namedtuple redefines none of them; torch's named tuples are C types of torch's own.)
_PROTOCOL = frozenset({"__iter__", "__getitem__", "__len__", "__reversed__", "__contains__", "__bool__", "__eq__",
                       "__ne__", "__getattribute__", "__getattr__", "__reduce__", "__reduce_ex__", "__class__"})
_TORCH_TUPLES = frozenset(t for t in vars(torch.return_types).values() if isinstance(t, type))


def odd_containers(out: Any) -> list[str]:
    """The names of tuple and list subclasses in forward's result that redefine _PROTOCOL: the work of
    one (a list subclass computing its result in `__iter__`, a red-team review, 2026-12-01) no longer
    runs, as only their stored items are read, but the attempt is a finding."""
    found: set[str] = set()

    def walk(o: Any) -> None:
        items = _items(o)
        if items is None:
            return
        kind = type(o)
        if kind not in (tuple, list) and kind not in _TORCH_TUPLES:
            mro = type.__dict__["__mro__"].__get__(kind, type)
            own = [c for c in mro if c not in (tuple, list, object)]
            if any(_PROTOCOL & set(type.__dict__["__dict__"].__get__(c, type)) for c in own):
                found.add(type_name(kind))
        for item in items:
            walk(item)

    walk(out)
    return sorted(found)


def output_structure_findings(out: Any, flat: list[Any]) -> list[Finding]:
    """`out` is forward's result, `flat` its leaves (flatten_outputs)."""
    odd = odd_containers(out) + odd_leaves(flat)
    if not odd:
        return []
    return [Finding("output-type", f"forward returned {', '.join(odd[:4])}: an object of the candidate's "
                    "whose methods could do its work when the outputs are read")]


def output_type_findings(outs: list[Any]) -> list[Finding]:
    bad = [type_name(type(o)) for o in outs if issubclass(type(o), torch.Tensor) and type(o) is not torch.Tensor]
    if bad:
        return [
            Finding(
                "tensor-subclass-output",
                f"forward returned tensor subclasses ({', '.join(bad)}): "
                "their work could run lazily at comparison time",
            )
        ]
    return []


def reference_subclass_findings(cand_cls: type, ref_cls: type, ref_path: Path) -> list[Finding]:
    """ModelNew inheriting from the reference (found by object, by file or by name) runs the
    reference's forward, however the base class was reached (an import, sys.modules, gc)."""
    ref_file = ref_path.resolve()
    for base in cand_cls.__mro__[1:]:
        if base.__module__.startswith("torch"):
            continue
        file = getattr(sys.modules.get(base.__module__), "__file__", None)
        from_ref = base is ref_cls or (file is not None and Path(file).resolve() == ref_file)
        if from_ref or base.__name__ == ref_cls.__name__:
            return [
                Finding(
                    "subclasses-reference",
                    f"{cand_cls.__name__} inherits from {base.__module__}.{base.__name__}, "
                    "the reference's class: its forward is the reference's",
                )
            ]
    return []


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN == NaN of the same payload) without copying either tensor."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
    if as_int is None:
        return torch.equal(a, b)
    return torch.equal(a.view(as_int), b.view(as_int))


def _snapshot(o: Any) -> Any:
    if not isinstance(o, torch.Tensor):
        return o
    s = o.detach().clone()
    return s if type(s) is torch.Tensor else s.as_subclass(torch.Tensor)


@dataclass
class ObservedCall:
    outs: list[Any]  # flattened outputs as they were when forward returned (snapshots)
    ops: Counter[str]  # aten ops dispatched inside forward
    findings: list[Finding] = field(default_factory=list)
    host_reads: int = 0  # of those, copies of GPU data to the host
    # The plain tensor outputs themselves (None for anything else), in `outs`' order: where they
    # live, for the checks of agents/verify/aliasing.py.
    returned: list[Any] = field(default_factory=list)


def observed_call(
    fn: Callable[[], Any],
    device: torch.device,
    threads_before: set[threading.Thread],
    wait_threads_s: float = 2.0,
) -> ObservedCall:
    """Run forward once under the op recorder, snapshot its outputs in stream order right after it
    returns, then wait for everything (device-wide, and for threads) and look again.

    The snapshot is what gets compared with the reference: it is exactly what stream-ordered work
    (what the timer sees) produced. A difference with the later state means work that was not
    ordered on the caller's stream: a side stream or a thread, which the timing would miss."""
    rec = OpRecorder()
    with rec:
        before = mode_stacks()
        out = fn()
        left = mode_stacks() != before
    # Read with no torch-function mode: a mode the candidate left on the stack ran its work in the
    # first read of the outputs, after the recorder had closed (a red-team review, 2026-12-01).
    with torch._C.DisableTorchFunction():
        flat = flatten_outputs(out)
        # The clone is enqueued on the current stream, so it sees exactly what stream-ordered work wrote.
        snaps = [_snapshot(o) for o in flat]
    findings = output_type_findings(flat) + output_structure_findings(out, flat)
    ops, changed = rec.recorded_ops()
    if changed is not None:
        findings.append(changed)
    if left:
        findings.append(Finding("global-intercept", "forward returned with a torch function or dispatch mode left on "
                                "the stack: its handler runs in whatever reads the outputs next"))
    new_threads = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    if device.type == "cuda":
        torch.cuda.synchronize()
    if new_threads:
        findings.append(
            Finding(
                "background-thread",
                f"{len(new_threads)} thread(s) started by the candidate still running after forward returned: "
                f"{', '.join(t.name for t in new_threads[:3])}",
            )
        )
        deadline = time.monotonic() + wait_threads_s
        for t in new_threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
    for i, (o, s) in enumerate(zip(flat, snaps, strict=True)):
        # A plain tensor is compared in place: no third copy of what may be a large output.
        if isinstance(o, torch.Tensor) and not bits_equal(
            o.detach() if type(o) is torch.Tensor else _snapshot(o), s
        ):
            findings.append(
                Finding(
                    "unsynchronised-work",
                    f"output {i} changed after forward returned: work ran off the current stream "
                    "(side stream or thread) and would escape the timing",
                )
            )
    return ObservedCall(snaps, ops, findings, rec.host_reads, [o if type(o) is torch.Tensor else None for o in flat])


def output_stats(outs: list[Any]) -> list[Any]:
    """Sum and L1 norm (float64) of each tensor output: two cheap reductions that any output that
    passes the elementwise comparison must nearly reproduce (see stats_match)."""
    stats: list[Any] = []
    for o in outs:
        if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()):
            d = torch.view_as_real(o.detach()) if o.is_complex() else o.detach()
            stats.append(
                (
                    float(torch.sum(d, dtype=torch.float64).item()),
                    float(torch.linalg.vector_norm(d, 1, dtype=torch.float64).item()),
                )
            )
        elif isinstance(o, torch.Tensor):
            stats.append(("int", int(torch.sum(o, dtype=torch.int64).item()), tuple(o.shape)))
        else:
            stats.append(("value", repr(o)))
    return stats


def stats_match(got: list[Any], ref: list[Any], rtol: float) -> bool:
    """If every element satisfies |g - r| <= rtol*mean|r| + rtol*|r| (compare.py's rule), then both
    |sum g - sum r| and | |g|_1 - |r|_1 | are at most sum|g - r| <= 2*rtol*|r|_1. So this rejects
    no output that the full comparison would accept; it catches stale, garbage or missing work."""
    if len(got) != len(ref):
        return False
    for g, r in zip(got, ref, strict=True):
        if isinstance(r, tuple) and isinstance(r[0], float):
            if not (isinstance(g, tuple) and isinstance(g[0], float)):
                return False
            bound = 2.5 * rtol * r[1] + 1e-30
            for gv, rv in zip(g, r, strict=True):
                if rv != rv or abs(rv) == float("inf") or gv != gv or abs(gv) == float("inf"):
                    if not (gv == rv or (gv != gv and rv != rv)):
                        return False
                elif abs(gv - rv) > bound:
                    return False
        elif g != r:
            return False
    return True


# A marker kernel enqueued on the caller's stream right after forward returns (torch.cuda._sleep's
# kernel). Work on other streams that ends after the marker starts was not joined to the caller's
# stream: the timer's end event, recorded there, would not wait for it.
MARKER = "spin_kernel"


def kernel_timeline(run: Callable[[], Any], *, hold_cycles: int = 0,
                    cpu_ops: Counter[str] | None = None) -> list[dict[str, Any]]:
    """Kernels launched by `run` and by the markers around it: name, stream, start and end (us).

    hold_cycles > 0 first parks the caller's stream on a spin kernel, so work that properly waits
    for the caller's stream starts only when the spin ends (see late_side_kernels). `cpu_ops`, where
    given, counts the profiler's CPU operator events by name (aten::native_dropout, say)."""
    import json
    import os
    import tempfile

    torch.cuda.synchronize()
    with _profile(activities=[_ProfilerActivity.CUDA, _ProfilerActivity.CPU]) as prof:
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        run()
        torch.cuda._sleep(1000)  # the marker
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    if cpu_ops is not None:
        cpu_ops.update(e.get("name", "?") for e in trace.get("traceEvents", []) if e.get("cat") == "cpu_op")
    return [
        {
            "name": e.get("name", "?"),
            "stream": int(e.get("args", {}).get("stream", -1)),
            "start": float(e.get("ts", 0.0)),
            "end": float(e.get("ts", 0.0)) + float(e.get("dur", 0.0)),
        }
        for e in trace.get("traceEvents", [])
        if e.get("cat") == "kernel"
    ]


def kernel_times(kernels: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, int]]:
    """GPU microseconds (longest first) and launches per kernel name in a timeline, the markers left out."""
    us: dict[str, float] = {}
    launches: dict[str, int] = {}
    for k in kernels:
        if MARKER not in k["name"]:
            us[k["name"]] = us.get(k["name"], 0.0) + k["end"] - k["start"]
            launches[k["name"]] = launches.get(k["name"], 0) + 1
    return dict(sorted(us.items(), key=lambda kv: -kv[1])), launches


def busy_us(kernels: list[dict[str, Any]]) -> float:
    """Microseconds in which at least one of the forward's kernels ran (the union of their intervals,
    markers left out): overlapping kernels on library side streams count once."""
    spans = sorted((k["start"], k["end"]) for k in kernels if MARKER not in k["name"])
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


# Kernels only PyTorch itself launches: ATen's native kernels and Inductor's generated Triton
# kernels. Library kernels (cuBLAS, cuDNN) carry no such mark: whether ATen or the candidate's own
# C++ called them is the op recorder's question, not the timeline's.
_TORCH_LAUNCHED = re.compile(r"\bat::native::|\bat::cuda::|^triton_(poi|per|red|tem|for)_")
# ... of which the allocation, copy and draw calls a ModelNew may make (torch_ops.ALLOWED_ATEN)
# launch these: copies (.contiguous(), .to(), clone), fills (zeros, fill_), arange, random draws.
_ALLOWED_TORCH_KERNEL = re.compile(
    r"copy_kernel|CopyFunctor|FillFunctor|fill_kernel|arange|elementwise_kernel_with_index|distribution_"
    r"|CatArrayBatchedCopy_contig|philox"
)


# ATen's dropout kernel: on CUDA, aten.native_dropout over ones (a mask drawn, torch_ops.DROPOUT_MASK)
# draws and writes in one kernel. Allowed only as many times as the candidate draws masks that launch
# it (torch_launched's mask_draws): the same kernel applied to computed data (a graph replayed, say)
# is compute.
_DROPOUT_KERNEL = re.compile(r"\bfused_dropout_kernel")


def torch_launched(names: list[str], launches: dict[str, int] | None = None, mask_draws: int = 0) -> list[str]:
    """The kernels among `names` (one forward's timeline) that PyTorch launched for compute: work a
    candidate's own sources did not do, however it reached the GPU (another thread, a CUDA graph of
    PyTorch ops captured when imported, a library calling back into ATen).

    `mask_draws`: how many of ATen's dropout kernels are mask draws (the worker's _check_streams:
    the draws the op recorder saw launch one in an unprofiled forward, and no more than the
    aten::native_dropout calls this forward's own trace shows, so none comes from a graph replay);
    dropout kernels up to that many launches (`launches`, per name; one each where not given) pass."""
    foreign = [n for n in names if _TORCH_LAUNCHED.search(n.removeprefix("void ")) and not _ALLOWED_TORCH_KERNEL.search(n)]
    dropout = [n for n in foreign if _DROPOUT_KERNEL.search(n)]
    if dropout and sum((launches or {}).get(n, 1) for n in dropout) <= mask_draws:
        foreign = [n for n in foreign if n not in dropout]
    return foreign


# A timed forward faster than this share of its own kernels' busy time (less a few microseconds of
# clock granularity) did not run those kernels when timed, or the timing was tampered with.
BUSY_SHARE, BUSY_SLACK_US = 0.7, 5.0


def timing_floor_finding(median_ms: float, busy: float) -> Finding | None:
    floor_us = BUSY_SHARE * busy - BUSY_SLACK_US
    if busy <= 0 or median_ms * 1e3 >= floor_us:
        return None
    return Finding(
        "timing-tamper",
        f"timed median {median_ms * 1e3:.1f} us per forward, below its own kernels' GPU time run back to back "
        f"({busy:.1f} us busy, profiled in the same worker; floor {BUSY_SHARE:g}x less {BUSY_SLACK_US:g} us): "
        "what was timed is not what ran",
        data={"median_us": median_ms * 1e3, "busy_us": busy},
    )


# Profiles taken again before a floor miss is believed, each after a longer pause: a neighbour's GPU
# work outside the lock (torch.compile's first call in another worker, another program) time-slices
# with a profiled forward and stretches its kernels (seen: 13.9 ms busy for a forward whose kernels
# take 6.3 ms; level 3's GRUBidirectional, one persistent kernel, at 31.6 ms busy on three profiles
# taken back to back for a forward timed at 16.9 ms and profiled at 16.6 ms in every other run, on
# the H200 at 173ccfb). A neighbour's burst passes within seconds; a tamper misses every time.
FLOOR_PAUSES_S = (0.5, 2.0, 4.0)
FLOOR_REPROFILES = len(FLOOR_PAUSES_S)


def confirmed_timing_floor(median_ms: float, busy: float, reprofile: Callable[[], float],
                           pauses: tuple[float, ...] = FLOOR_PAUSES_S,
                           pause: Callable[[float], None] = time.sleep) -> tuple[Finding | None, float]:
    """The timing-floor finding, only if it holds against the least busy time of up to
    len(`pauses`) more profiles (`reprofile`: one profiled forward's busy time), each after its
    pause; and that least busy time. A candidate whose timing is tampered with misses the floor
    every time; one profiled beside a neighbour's work misses it until the neighbour is done.
    Taking the least busy time cannot hide a tamper: doing less work when profiled lowers the floor
    as much on the first profile as on a later one."""
    finding = timing_floor_finding(median_ms, busy)
    for wait in pauses:
        if finding is None:
            break
        pause(wait)
        busy = min(busy, reprofile())
        finding = timing_floor_finding(median_ms, busy)
    return finding, busy


def late_side_kernels(kernels: list[dict[str, Any]]) -> tuple[int | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """(the caller's stream, kernels on other streams still running when the marker started,
    all kernels on other streams). The marker is the last spin kernel; its stream is the caller's."""
    markers = [k for k in kernels if MARKER in k["name"]]
    if not markers:
        return None, [], []
    marker = max(markers, key=lambda k: k["start"])
    caller = marker["stream"]
    side = [k for k in kernels if k["stream"] != caller and MARKER not in k["name"]]
    # Profiler timestamps of one device share a clock; a microsecond of slack covers rounding.
    late = [k for k in side if k["end"] > marker["start"] + 1.0]
    return caller, late, side
