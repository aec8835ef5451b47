"""Where the reference spends its time: a ranking of aten ops by module and source line.

The Planner reads this to know which parts of a Task are worth a custom kernel. The reference is
built and fed as the Verifier does (same seeds, no grad, training mode) and run under
torch.profiler; each op's time is its CUDA kernels' time where a GPU is present, else its self CPU
time. Two kinds of range are pushed around the ops so the profile can be mapped back:

- forward pre/post hooks push one range per submodule (its qualified name), because the
  profiler's own module events name classes (`Linear_0`), not attributes, in eager mode;
- a TorchFunctionMode pushes one range per torch call made from the task file, named by the
  innermost line of that file on the Python stack, because the Python tracer behind
  `with_stack=True` names functions by their `def` line, not by the calling line.

Time is attributed to the outermost op of each dispatcher call chain that survives
decomposition (aten::linear -> aten::addmm, aten::conv2d -> aten::convolution), so the names
match the ops of the traced graph the Planner groups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from stitchcuda.types import Task

_MODULE = "stitchcuda.module:"
_LINE = "stitchcuda.line:"
ROOT = ""  # the qualified name of the task's own module, as nn.Module.named_modules gives it


@dataclass
class OpShare:
    op: str
    module: str  # qualified submodule name ("" for the task's module itself)
    file: str
    line: int  # 0 where no frame of the task file was on the stack
    time_us: float  # per iteration
    share: float  # of total_us
    calls: int  # per iteration


@dataclass
class ReferenceProfile:
    task: str
    device: str
    clock: str  # "cuda" (kernel time), "cpu" (self CPU time) or "none" (profiling failed)
    total_us: float  # per iteration, summed over ops
    ops: list[OpShare] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What only a timeline shows (profiling.nsys): the GPU's busy share of each forward's span, ...
    timeline: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _LineRanges(TorchFunctionMode):
    """Wraps each torch call made from the task file in a range named by that file's line."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's signature
        kwargs = kwargs or {}
        # The hooks' own range calls must not be wrapped: a range around their enter would close
        # before the module range it opened.
        if "record_function" in getattr(func, "__name__", ""):
            return func(*args, **kwargs)
        line = self._line()
        if not line:
            return func(*args, **kwargs)
        with self.range(f"{_LINE}{line}"):
            return func(*args, **kwargs)

    def range(self, name: str) -> contextlib.AbstractContextManager[Any]:
        return torch.profiler.record_function(name)

    def _line(self) -> int:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == self.path:
                return frame.f_lineno
            frame = frame.f_back
        return 0


@contextlib.contextmanager
def _module_ranges(
    model: torch.nn.Module, make_range: Any = torch.profiler.record_function
) -> Iterator[None]:
    """A range per submodule call, named by its qualified name (`make_range(name)` makes one)."""
    open_ranges: list[Any] = []

    def pre(name: str):
        def hook(mod: torch.nn.Module, args: Any) -> None:
            rf = make_range(f"{_MODULE}{name}")
            rf.__enter__()
            open_ranges.append(rf)

        return hook

    def post(mod: torch.nn.Module, args: Any, out: Any) -> None:
        if open_ranges:
            open_ranges.pop().__exit__(None, None, None)

    handles = []
    for name, sub in model.named_modules():
        handles.append(sub.register_forward_pre_hook(pre(name)))
        handles.append(sub.register_forward_hook(post, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        while open_ranges:
            open_ranges.pop().__exit__(None, None, None)


@functools.cache
def _decomposes(name: str, overload: str) -> bool:
    """Whether the op is CompositeImplicitAutograd, i.e. absent from a traced aten graph."""
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    try:
        ns, op = name.split("::", 1)
        packet = getattr(getattr(torch.ops, ns), op)
        # The profiler often leaves the overload out: then judge by "default", or by all overloads
        # where there is none (aten::flatten).
        names = packet.overloads()
        if overload or "default" in names:
            names = [overload or "default"]
        return bool(names) and all(getattr(packet, n).has_kernel_for_dispatch_key(key) for n in names)
    except Exception:  # noqa: BLE001 - unknown ops count as real ops
        return False


def _is_op(evt: Any) -> bool:
    return (
        "::" in evt.name
        and not evt.name.startswith((_MODULE, _LINE))
        and not getattr(evt, "is_python_function", False)
        and not getattr(evt, "is_user_annotation", False)
    )


def _ancestors(evt: Any) -> Iterator[Any]:
    p = evt.cpu_parent
    while p is not None:
        yield p
        p = p.cpu_parent


def _owner(evt: Any) -> Any | None:
    """The op an event's time belongs to: the outermost non-decomposing op of its op chain."""
    chain = [evt] if _is_op(evt) else []
    for a in _ancestors(evt):
        if not _is_op(a):
            if chain:
                break
            continue
        chain.append(a)
    if not chain:
        return None
    kept = [e for e in chain if not _folds(e)]
    if kept:
        return kept[-1]
    # A decomposing op's own time (dispatch, argument checks) goes to what it lowers to: its last
    # op child, which does the work (linear: t then addmm; conv2d: convolution).
    top = chain[-1]
    while _folds(top):
        children = [c for c in top.cpu_children if _is_op(c)]
        if not children:
            return chain[-1]
        top = children[-1]
    return top


def _folds(evt: Any) -> bool:
    """Whether the op decomposes, so its time folds into an op of the traced graph."""
    return _decomposes(evt.name, getattr(evt, "overload_name", "") or "")


def _where(op: Any, path: str) -> tuple[str, int]:
    module, line = None, 0
    for a in _ancestors(op):
        if module is None and a.name.startswith(_MODULE):
            module = a.name[len(_MODULE) :]
        if not line and a.name.startswith(_LINE):
            line = int(a.name[len(_LINE) :])
    if not line:
        # Older profilers attach the Python stack ("file(line): func") to the op itself.
        for e in (op, *_ancestors(op)):
            for entry in getattr(e, "stack", None) or []:
                if entry.startswith(path + "("):
                    line = int(entry[len(path) + 1 : entry.index(")", len(path))])
                    break
            if line:
                break
    return (ROOT if module is None else module), line


def _event_time(evt: Any, clock: str) -> float:
    if clock == "cuda":
        return sum(k.duration for k in getattr(evt, "kernels", []) or [])
    return max(0.0, float(evt.self_cpu_time_total))


def attribute(events: Any, path: str, clock: str, iterations: int) -> tuple[list[OpShare], float]:
    """Rank (op, module, line) by time per iteration; the second value is time outside any op.

    Each (op, module, line) is charged the median of its per-iteration times, where its calls split
    evenly over the iterations: one iteration preempted on a busy machine (seen on a 2-core CI host, a
    ReLU charged 2 ms once) would otherwise outrank the op that does the work."""
    occurrences: dict[tuple[str, str, int], list[float]] = {}
    slot_of: dict[int, tuple[tuple[str, str, int], int]] = {}
    outside = 0.0
    for evt in events:
        if getattr(evt, "device_type", None) not in (None, torch.autograd.DeviceType.CPU):
            continue
        if getattr(evt, "is_async", False):
            continue
        t = _event_time(evt, clock)
        owner = _owner(evt)
        if owner is None:
            # Ranges' own device spans (gpu_user_annotation) would count their ops' time twice.
            if not (evt.name.startswith((_MODULE, _LINE)) or getattr(evt, "is_user_annotation", False)):
                outside += t
            continue
        slot = slot_of.get(id(owner))
        if slot is None:
            module, line = _where(owner, path)
            key = (owner.name, module, line)
            times = occurrences.setdefault(key, [])
            slot = slot_of[id(owner)] = (key, len(times))
            times.append(0.0)
        occurrences[slot[0]][slot[1]] += t
    per_iteration = {key: _per_iteration(times, iterations) for key, times in occurrences.items()}
    total = sum(per_iteration.values())
    ops = [
        OpShare(
            op=op,
            module=module,
            file=path,
            line=line,
            time_us=per_iteration[op, module, line],
            share=per_iteration[op, module, line] / total if total > 0 else 0.0,
            calls=math.ceil(len(occurrences[op, module, line]) / iterations),
        )
        for op, module, line in occurrences
    ]
    ops.sort(key=lambda o: (-o.time_us, o.op, o.module, o.line))
    return ops, outside / iterations


def _per_iteration(times: list[float], iterations: int) -> float:
    """The median over iterations of one op's time, its calls taken in order, where they split evenly
    over the iterations; the mean where they do not (an op called only in some iterations)."""
    if iterations < 3 or len(times) % iterations:
        return sum(times) / iterations
    n = len(times) // iterations
    return statistics.median(sum(times[i * n : (i + 1) * n]) for i in range(iterations))


# Recorded profiles: the fields `attribute` reads from each profiler event, as JSON, so the ranking
# can be replayed (and tested) on a machine without the GPU that produced it.
RECORD_VERSION = 1


def dump_events(events: Any, path: str, clock: str, iterations: int) -> dict[str, Any]:
    index = {id(e): i for i, e in enumerate(events)}
    rows = []
    for e in events:
        dt_ = getattr(e, "device_type", None)
        rows.append({
            "name": e.name,
            "overload": getattr(e, "overload_name", "") or "",
            "device": None if dt_ in (None, torch.autograd.DeviceType.CPU) else str(dt_),
            "async": bool(getattr(e, "is_async", False)),
            "annotation": bool(getattr(e, "is_user_annotation", False)),
            "python": bool(getattr(e, "is_python_function", False)),
            "self_cpu_us": float(e.self_cpu_time_total),
            "kernels_us": [float(k.duration) for k in getattr(e, "kernels", []) or []],
            "stack": [s for s in (getattr(e, "stack", None) or []) if s.startswith(path)],
            "parent": index.get(id(e.cpu_parent)) if e.cpu_parent is not None else None,
        })
    return {"version": RECORD_VERSION, "path": path, "clock": clock, "iterations": iterations,
            "torch": torch.__version__, "events": rows}


@dataclass
class _Recorded:
    name: str
    overload_name: str
    device_type: str | None
    is_async: bool
    is_user_annotation: bool
    is_python_function: bool
    self_cpu_time_total: float
    kernels: list[Any]
    stack: list[str]
    cpu_parent: Any = None
    cpu_children: list[Any] = field(default_factory=list)


def load_events(record: dict[str, Any]) -> list[Any]:
    """Events from dump_events, linked to their parents and children again."""
    out = [
        _Recorded(r["name"], r["overload"], r["device"], r["async"], r["annotation"], r["python"],
                  r["self_cpu_us"], [_Kernel(d) for d in r["kernels_us"]], r["stack"])
        for r in record["events"]
    ]
    for e, r in zip(out, record["events"], strict=True):
        if r["parent"] is not None:
            e.cpu_parent = out[r["parent"]]
            out[r["parent"]].cpu_children.append(e)
    return out


@dataclass
class _Kernel:
    duration: float


def replay(record: dict[str, Any], task: str = "", device: str = "recorded") -> ReferenceProfile:
    """The ranking profile_task would have printed for a recorded run."""
    ops, outside = attribute(load_events(record), record["path"], record["clock"], record["iterations"])
    return _summarise(task, device, record["clock"], ops, outside, record["iterations"], warmup=None)


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    return torch.device(device)


def profile_task(
    task: Task, *, iterations: int = 3, device: str | torch.device | None = None, warmup: int = 2,
    record: Path | None = None,
) -> ReferenceProfile:
    """Profile the reference forward of `task`; failures come back as a profile with a note."""
    dev_name = str(device) if device is not None else "?"
    try:
        dev = _resolve_device(device)
        dev_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
        # The profiler now and then hands back an event name that is not UTF-8 (seen with torch
        # 2.13 on CPU, in some runs of the tests here): that run is thrown away and profiled again.
        for attempt in range(3):
            try:
                return _profile(task, dev, dev_name, max(1, iterations), max(0, warmup), record)
            except UnicodeDecodeError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
    except Exception as e:  # noqa: BLE001 - any failure is reported, never raised
        msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return ReferenceProfile(task.name, dev_name, "none", 0.0, [], [f"profiling failed: {msg}"])


def build_reference(task: Task, dev: torch.device) -> tuple[torch.nn.Module, list[Any]]:
    """The reference module and one input set, as the Verifier builds and feeds them."""
    # Imported here: the worker module is heavy and only needed once a profile is asked for.
    from stitchcuda.inputs import make_inputs
    from stitchcuda.task import build_model, load_task_module

    module, cls = load_task_module(task)
    model = build_model(cls, list(getattr(module, task.init_inputs_fn)()), 42, dev, task.mode)
    return model, make_inputs(getattr(module, task.inputs_fn), 0, dev)


def _profile(
    task: Task, dev: torch.device, dev_name: str, iterations: int, warmup: int, record: Path | None = None
) -> ReferenceProfile:
    model, inputs = build_reference(task, dev)
    cuda = dev.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    path = str(Path(task.path).resolve())
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        if cuda:
            torch.cuda.synchronize(dev)
        prof = torch.profiler.profile(
            activities=activities, record_shapes=True, with_stack=True, with_modules=True
        )
        with prof, _module_ranges(model), _LineRanges(path):
            for _ in range(iterations):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize(dev)
    clock = "cuda" if cuda else "cpu"
    if record is not None:
        import json

        Path(record).write_text(json.dumps(dump_events(prof.events(), path, clock, iterations)))
    ops, outside = attribute(prof.events(), path, clock, iterations)
    return _summarise(task.name, dev_name, clock, ops, outside, iterations, warmup)


def _statistic(iterations: int) -> str:
    return "median" if iterations >= 3 else "mean"


def _summarise(
    task: str, dev_name: str, clock: str, ops: list[OpShare], outside: float, iterations: int, warmup: int | None
) -> ReferenceProfile:
    total = sum(o.time_us for o in ops)
    what = "CUDA kernel time" if clock == "cuda" else "self CPU time"
    after = f" after {warmup} warm-up calls" if warmup is not None else " (recorded)"
    notes = [f"{what} per iteration, {_statistic(iterations)} of {iterations}{after}"]
    if outside > 0.01 * max(total, 1e-9):
        notes.append(f"{outside:.1f} us per iteration outside any op (Python, profiler overhead), not ranked")
    if not ops:
        notes.append("no op time was recorded")
    return ReferenceProfile(task, dev_name, clock, total, ops, notes)


def format_table(profile: ReferenceProfile, top: int = 10) -> str:
    """A compact ranking for the Plan and the Coder's prompt."""
    head = (
        f"reference {profile.task} on {profile.device}: {profile.total_us:.1f} us/iter "
        f"({profile.clock} clock)"
    )
    lines = [head, *(f"  note: {n}" for n in profile.notes)]
    if not profile.ops:
        return "\n".join(lines)
    lines.append(f"  {'share':>6} {'us/iter':>10} {'calls':>5}  {'op':<28} {'module':<20} line")
    for o in profile.ops[:top]:
        mod = o.module or "(top)"
        line = str(o.line) if o.line else "?"
        lines.append(f"  {o.share:6.1%} {o.time_us:10.1f} {o.calls:5d}  {o.op:<28} {mod:<20} {line}")
    rest = profile.ops[top:]
    if rest:
        share = sum(o.share for o in rest)
        lines.append(f"  {share:6.1%} {sum(o.time_us for o in rest):10.1f}        ({len(rest)} more ops)")
    return "\n".join(lines)


def from_dict(d: dict[str, Any]) -> ReferenceProfile:
    ops = [OpShare(**o) for o in d.get("ops", [])]
    return ReferenceProfile(**{**d, "ops": ops})


def profile_in_subprocess(
    task: Task, *, timeout_s: float = 300.0, device: str | None = None, iterations: int = 3,
    record: Path | None = None,
) -> ReferenceProfile:
    """profile_task in a child process: the user's module may crash or hang, the caller may not.
    A profile of the same file content on the same GPU and torch comes from the cache (profiling.cache)
    unless `record` asks for the raw events."""
    import json
    import subprocess

    from stitchcuda.profiling import cache

    gpu = device_name(device)
    if record is None and (hit := cache.load(task, "torch.profiler", gpu, iterations)) is not None:
        return from_dict(hit)

    request = {
        "path": str(task.path),
        "class_name": task.class_name,
        "init_inputs_fn": task.init_inputs_fn,
        "inputs_fn": task.inputs_fn,
        "mode": task.mode,
        "device": device,
        "iterations": iterations,
        "record": str(record) if record is not None else None,
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "stitchcuda.profiling.reference"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return ReferenceProfile(task.name, device or "?", "none", 0.0, [], [f"profiling timed out after {timeout_s:.0f} s"])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return ReferenceProfile(task.name, device or "?", "none", 0.0, [], [f"profiling process failed: {tail}"])
    profile = json.loads(lines[-1])
    if record is None:
        cache.save(task, "torch.profiler", gpu, iterations, profile)
    return from_dict(profile)


def device_name(device: str | None) -> str:
    """The GPU's name, for cache keys; "cpu" without one."""
    dev = _resolve_device(device)
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"


def _main() -> None:
    import json

    req = json.loads(sys.stdin.read())
    task = Task(Path(req["path"]), req["class_name"], req["init_inputs_fn"], req["inputs_fn"],
                mode=req.get("mode", "as-built"))
    record = Path(req["record"]) if req.get("record") else None
    profile = profile_task(task, iterations=req.get("iterations", 3), device=req.get("device"), record=record)
    print(json.dumps(profile.to_dict()))


if __name__ == "__main__":
    _main()
