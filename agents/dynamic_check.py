"""Dynamic anti-hacking: what a candidate actually does while its forward runs."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from stitchcuda.types import Finding

from .torch_ops import is_compute_aten


class OpRecorder(TorchDispatchMode):
    """Records every aten op dispatched, from Python or from C++ (an extension calling at::matmul
    goes through the dispatcher too), by overload-packet name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def compute_ops(self) -> dict[str, int]:
        return {k: v for k, v in self.ops.items() if is_compute_aten(k)}


def trace_ops(fn: Callable[[], Any]) -> tuple[Any, Counter[str]]:
    with OpRecorder() as rec:
        out = fn()
    return out, rec.ops


def torch_compute_finding(ops: Counter[str]) -> Finding | None:
    compute = {k: v for k, v in ops.items() if is_compute_aten(k)}
    if not compute:
        return None
    listed = ", ".join(f"aten.{k} x{v}" for k, v in sorted(compute.items(), key=lambda kv: -kv[1]))
    return Finding(
        "torch-compute-in-forward",
        f"forward ran PyTorch compute ops: {listed}",
        data={"ops": compute},
    )


def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, tuple | list):
        return [o for item in out for o in flatten_outputs(item)]
    return [out]


def output_type_findings(outs: list[Any]) -> list[Finding]:
    bad = [type(o).__name__ for o in outs if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor]
    if bad:
        return [
            Finding(
                "tensor-subclass-output",
                f"forward returned tensor subclasses ({', '.join(bad)}): "
                "their work could run lazily at comparison time",
            )
        ]
    return []


def late_write_findings(run: Callable[[], Any], device: torch.device) -> tuple[Any, list[Finding]]:
    """Run forward once, snapshot the outputs in stream order right after it returns, then wait for
    everything (device-wide, and for threads) and look again. A difference means work that was not
    ordered on the caller's stream: a side stream or thread the timing would miss."""
    threads_before = set(threading.enumerate())
    out = run()
    outs = [o for o in flatten_outputs(out) if isinstance(o, torch.Tensor)]
    # The clone is enqueued on the current stream, so it sees exactly what stream-ordered work wrote.
    snaps = [o.detach().clone() for o in outs]
    findings: list[Finding] = []
    new_threads = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    if device.type == "cuda":
        torch.cuda.synchronize()
    for t in new_threads:
        t.join(timeout=5.0)
    if new_threads:
        findings.append(
            Finding(
                "background-thread", f"forward left {len(new_threads)} thread(s) running after it returned"
            )
        )
    for i, (o, s) in enumerate(zip(outs, snaps, strict=True)):
        if not torch.equal(torch.nan_to_num(o, nan=0.0), torch.nan_to_num(s, nan=0.0)) or not torch.equal(
            o.isnan(), s.isnan()
        ):
            findings.append(
                Finding(
                    "unsynchronised-work",
                    f"output {i} changed after forward returned: work ran off the current stream (side stream or thread) "
                    "and would escape the timing",
                )
            )
    return out, findings


def kernel_streams(run: Callable[[], Any]) -> tuple[set[int], list[tuple[str, int]]]:
    """Streams that the kernels launched by `run` ran on (CUDA only), from the profiler trace."""
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        run()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    kernels = [
        (e.get("name", "?"), int(e.get("args", {}).get("stream", -1)))
        for e in trace.get("traceEvents", [])
        if e.get("cat") == "kernel"
    ]
    return {s for _, s in kernels}, kernels
