"""Where a forward's time goes outside its kernels: the built-in candidate, eager and torch.compile.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_host_overhead.py OUT.json TASK.py [TASK.py ...]
PROBE_COMPILE=0 leaves torch.compile out; PROBE_TF32=1 adds torch.compile under the tf32 policy
(the bench's matched baseline for a tf32 candidate); PROBE_AUDIT=1 measures the candidate again inside the
audit hook's window, as the bench's worker times it; PROBE_TIMELINE=1 measures the candidate (and
torch.compile) again after the worker's stream check has run the profiler twice.
For each task: the built-in coder's candidate is generated and built here; then, for the candidate,
eager and torch.compile (default mode), one JSON record of
- kernel_us: one forward's summed GPU kernel (and memcpy/memset) time, from torch.profiler;
- timed_us: the Verifier's figure (timing.time_cuda: L2 flushed, synchronised, events, median);
- unflushed_us: the same without the flush;
- host_us: wall time of one call on the host (it returns once its work is queued), median;
and, for the candidate, the host cost of each part of its forward (input guards, contiguous,
allocation, the ctypes call) measured alone.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from probe_records import Records

from stitchcuda.agents.coder import builtin
from stitchcuda.agents.loop import plan_task
from stitchcuda.agents.verify.timing import L2Flusher, time_cuda, time_gpu_ahead
from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model, find_task, import_file, load_task_module

DEV = torch.device("cuda", 0)


def kernel_us(fn, args) -> tuple[float, dict[str, float]]:
    """One forward's summed GPU time, and the ten largest kernels by name."""
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    total = 0.0
    by_name: dict[str, float] = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            total += e.device_time
            by_name[e.name[:90]] = by_name.get(e.name[:90], 0.0) + e.device_time
    top = dict(sorted(by_name.items(), key=lambda kv: -kv[1])[:10])
    return total, {k: round(v, 1) for k, v in top.items()}


def host_us(fn, args, n: int = 200) -> float:
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def timed_us(fn, args, flush: bool) -> float:
    if flush:
        t, _ = time_cuda(lambda a: fn(*a), [args], trials=50, flusher=L2Flusher(DEV))
        return t.median_ms * 1e3
    t, _ = time_cuda(lambda a: fn(*a), [args], trials=50, flusher=lambda: None)
    return t.median_ms * 1e3


def per_call_us(fn, n: int = 2000) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) * 1e6 / n


def measure(label: str, fn, args) -> dict[str, Any]:
    total, top = kernel_us(fn, args)
    return {
        "what": label,
        "kernel_us": round(total, 2),
        "kernels": top,
        "timed_us": round(timed_us(fn, args, True), 2),
        "unflushed_us": round(timed_us(fn, args, False), 2),
        "host_us": round(host_us(fn, args), 2),
        # The same call with its launches queued ahead of the GPU (timing.time_gpu_ahead): timed_us
        # less this is what the host path costs each forward, under the same flush.
        "gpu_ahead_us": round(g.median_ms * 1e3, 2) if (g := time_gpu_ahead(lambda a: fn(*a), list(args), trials=30,
                                                                             flusher=L2Flusher(DEV))) else None,
    }


def parts(model, args) -> dict[str, float]:
    """The candidate forward's host-side pieces, each alone."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    shapes = [(t, tuple(t.shape), t.dtype) for t in tensors] + [
        (p, tuple(p.shape), p.dtype) for p in model.parameters()
    ]
    mod = sys.modules[type(model).__module__]
    check = getattr(mod, "_check", None)
    out: dict[str, float] = {}
    if check is not None:
        out["guards_us"] = per_call_us(lambda: [check(t, "t", s, d) for t, s, d in shapes])
    out["contiguous_us"] = per_call_us(lambda: [t.contiguous() for t in tensors])
    big = tensors[0]
    out["empty_us"] = per_call_us(lambda: torch.empty(big.shape, dtype=big.dtype, device=big.device))
    out["module_call_us"] = per_call_us(lambda: torch.nn.Module.__call__(torch.nn.Identity(), big))
    out["n_tensors"] = len(shapes)
    out.update(library_calls(mod, model, args))
    return out


def library_calls(mod, model, args) -> dict[str, float]:
    """Host time of the kernel library's one call per forward, through the CUDA graph
    (`stitch_forward_graph`) and without it (`stitch_forward`), on the buffers a forward passed;
    and the forward's host time less that call's: what Python costs around it."""
    lib = getattr(mod, "_lib", None)
    if lib is None:
        return {}
    seen: list[tuple[str, list, Any]] = []
    call_all = lib.call_all

    def spy(name, tensors, stream=None):
        seen.append((name, list(tensors), stream))
        return call_all(name, tensors, stream)

    lib.call_all = spy
    try:
        own_path_call(mod, model, args)
    finally:
        lib.call_all = call_all
    torch.cuda.synchronize()
    if len(seen) != 1:
        return {"library_calls": len(seen)}
    name, tensors, stream = seen[0]
    out: dict[str, float] = {"library_calls": 1, "library_entry": name}
    for entry in dict.fromkeys((name, "stitch_forward")):
        out[f"{entry}_host_us"] = round(host_us(lambda entry=entry: call_all(entry, tensors, stream), []), 2)
    out["forward_host_us"] = round(host_us(model, args), 2)
    out.update(python_parts(mod, model, args, lib, name, tensors, stream))
    return out


def own_path_call(mod, model, args) -> None:
    """One call of the model down forward's own path (through _kernels and call_all), the fast path
    held off for it and restored after."""
    fast = getattr(mod, "_FAST", None)
    saved = (fast.guard, fast.off) if fast is not None else None
    if fast is not None:
        fast.guard, fast.off = None, True
    try:
        model(*args)
    finally:
        if fast is not None:
            fast.guard, fast.off = saved


def python_parts(mod, model, args, lib, name, tensors, stream) -> dict[str, float]:
    """The generated forward's pieces around the library call, each alone: where its host time goes."""
    import ctypes

    out: dict[str, float] = {}
    kernels = getattr(mod, "_kernels", None)
    if kernels is not None:
        seen: list[tuple[list, tuple, list]] = []

        def spy(ts, state=()):
            got = kernels(ts, state)
            seen.append((list(ts), state, got))
            return got

        mod._kernels = spy
        try:
            own_path_call(mod, model, args)
        finally:
            mod._kernels = kernels
        fast = getattr(mod, "_FAST", None)
        if seen:
            ts, state, got = seen[0]
            out["kernels_fn_us"] = round(host_us(lambda: kernels(ts, state), []), 2)
            if fast is not None and fast.guard is not None:
                out["fast_fn_us"] = round(host_us(lambda: mod._fast(ts), []), 2)
                out["fast_taken"] = mod._fast(ts) is not None
            mod._kernels = lambda ts, state=(): got
            try:
                out["forward_without_kernels_us"] = round(host_us(model, args), 2)
            finally:
                mod._kernels = kernels
    fn = getattr(lib._lib, name)
    ptrs = (ctypes.c_void_p * max(1, len(tensors)))(*[t.data_ptr() for t in tensors])
    out["raw_call_us"] = round(host_us(lambda: fn(ptrs, stream or None), []), 2)
    out["ptr_array_us"] = per_call_us(lambda: (ctypes.c_void_p * max(1, len(tensors)))(*[t.data_ptr() for t in tensors]))
    big = tensors[0]
    import struct

    pack = struct.Struct(f"{max(1, len(tensors))}Q").pack
    out["ptr_pack_us"] = per_call_us(lambda: pack(*[t.data_ptr() for t in tensors]))
    out["empty_like_us"] = per_call_us(lambda: torch.empty_like(big))
    out["use_count_us"] = per_call_us(lambda: torch._C._storage_Use_Count(big.untyped_storage()._cdata))
    out["stream_us"] = per_call_us(lambda: torch._C._cuda_getCurrentRawStream(big.get_device()))
    out["is_compiling_us"] = per_call_us(torch.compiler.is_compiling)
    try:
        from torch._C._dynamo.guards import TensorGuards

        guard = TensorGuards(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
                             dynamic_dims_strides=[list(t.stride()) for t in tensors])
        out["tensor_guards_ok"] = bool(guard.check(*tensors))
        out["tensor_guards_us"] = per_call_us(lambda: guard.check(*tensors))
    except Exception as e:  # noqa: BLE001 - a private API: its absence is a finding, not a failure
        out["tensor_guards_error"] = f"{type(e).__name__}: {e}"[:200]
    return out


def audited(model, args, folder: Path) -> dict[str, Any]:
    """The candidate measured as the bench's worker times it: inside the audit hook's window
    (agents/verify/audit.py), the hook installed with a policy like the worker's."""
    from stitchcuda.agents.verify import audit

    audit.install(audit.Policy(writable=[str(folder), tempfile.gettempdir()], readable=[], home=None,
                               candidate=[str(folder)]))
    with audit.window():
        return measure("candidate under the audit window", model, args)


def main() -> None:
    out_path = Path(sys.argv[1])
    records = Records(out_path)
    torch.set_grad_enabled(False)
    for f in sys.argv[2:]:
        task = find_task(Path(f))
        plan = plan_task(task)
        cand = builtin.code(task, plan)
        with records.task(task=f, groups=len(plan.groups), supported=plan.supported) as rec:
            _, cls = load_task_module(task)
            ref_mod = import_file(task.path)
            # In the mode the Verifier runs it (training, as KernelBench builds it): in eval mode a
            # BatchNorm reads running statistics, and compile's figure was for other work than the
            # candidate's (level2/52 and /73 on 2026-11-27 compared batch statistics with running ones).
            ref = build_model(cls, list(ref_mod.get_init_inputs()), 42, DEV)
            args = make_inputs(ref_mod.get_inputs, 1, DEV)
            rec["eager"] = measure("eager", ref, args)
            if cand is not None:
                folder = Path(tempfile.mkdtemp(prefix="probe-host-"))
                mod = import_file(cand.write(folder))
                model = build_model(mod.ModelNew, list(ref_mod.get_init_inputs()), 42, DEV)
                model.load_state_dict(ref.state_dict())
                rec["candidate"] = measure("candidate", model, args)
                rec["candidate_parts"] = parts(model, args)
                if os.environ.get("PROBE_AUDIT") == "1":
                    rec["candidate_audited"] = audited(model, args, folder)
            compiled = None
            if os.environ.get("PROBE_COMPILE", "1") != "0":
                compiled = torch.compile(ref)
                compiled(*args)
                rec["compile"] = measure("torch.compile", compiled, args)
            if os.environ.get("PROBE_TF32") == "1":
                # torch.compile under the tf32 policy (the bench's compile_matched_ms for a tf32
                # candidate): which kernels its matmuls and convolutions get there.
                matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
                torch.set_float32_matmul_precision("high")
                torch.backends.cudnn.allow_tf32 = True
                try:
                    torch._dynamo.reset()
                    matched = torch.compile(ref)
                    matched(*args)
                    rec["compile_tf32"] = measure("torch.compile, tf32", matched, args)
                finally:
                    torch.set_float32_matmul_precision(matmul)
                    torch.backends.cudnn.allow_tf32 = cudnn
            if os.environ.get("PROBE_TIMELINE") == "1" and cand is not None:
                # As the Verifier's worker does before it times (its stream check): the profiler with
                # CPU and CUDA activity around one forward, twice; then the same figures again.
                from stitchcuda.agents.verify import dynamic_check as dyn

                for hold in (0, 20_000_000):
                    dyn.kernel_timeline(lambda model=model, args=args: model(*args), hold_cycles=hold)
                rec["candidate_after_timeline"] = measure("candidate after the profiler", model, args)
                if compiled is not None:
                    rec["compile_after_timeline"] = measure("torch.compile after the profiler", compiled, args)


if __name__ == "__main__":
    main()
