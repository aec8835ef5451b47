"""Does a candidate's forward replay as one CUDA graph after its first calls, and what does a call cost
on the host? For each task: the built-in coder's candidate is generated, built and called six times
(the graph path runs the first calls eagerly, then captures); then one more call is profiled (CPU and
CUDA activities) and the host-side calls it made are counted by name (cudaGraphLaunch against
cudaLaunchKernel, cudaLaunchCooperativeKernel, cuLaunchKernel, ...), and the host wall time of a call
is taken (median of 20, each after a synchronise).

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_graph_replay.py OUT.json TASK.py [TASK.py ...]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from stitchcuda.agents.coder import builtin
from stitchcuda.agents.loop import plan_task
from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model, find_task, import_file, load_task_module

DEV = torch.device("cuda", 0)
# Host-side calls worth counting: a replayed forward makes one graph launch and no kernel launch.
API = ("cudaGraphLaunch", "cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cudaMemsetAsync",
       "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaStreamBeginCapture")


def probe(path: Path) -> dict[str, Any]:
    task = find_task(path)
    plan = plan_task(task)
    cand = builtin.code(task, plan)
    rec: dict[str, Any] = {"task": path.name}
    if cand is None:
        rec["error"] = "no candidate"
        return rec
    _, cls = load_task_module(task)
    ref_mod = import_file(task.path)
    ref = build_model(cls, list(ref_mod.get_init_inputs()), 42, DEV)
    args = make_inputs(ref_mod.get_inputs, 1, DEV)
    mod = import_file(cand.write(Path(tempfile.mkdtemp(prefix="probe-graph-"))))
    model = build_model(mod.ModelNew, list(ref_mod.get_init_inputs()), 42, DEV)
    model.load_state_dict(ref.state_dict())
    for _ in range(6):
        model(*args)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model(*args)
        torch.cuda.synchronize()
    counts: dict[str, int] = {}
    for e in prof.events():
        for name in API:
            if e.name == name:
                counts[name] = counts.get(name, 0) + 1
    rec["calls"] = counts
    rec["cudnn_calls"] = sum(1 for e in prof.events() if e.name.startswith("cudnn"))
    times = []
    for _ in range(20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model(*args)
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    rec["host_us"] = round(statistics.median(times), 1)
    return rec


def main() -> None:
    out = Path(sys.argv[1])
    torch.set_grad_enabled(False)
    records = []
    for f in sys.argv[2:]:
        try:
            rec = probe(Path(f))
        except Exception as e:  # noqa: BLE001 - one task's failure is its record, the others still run
            rec = {"task": Path(f).name, "error": f"{type(e).__name__}: {e}"[:500]}
        print(json.dumps(rec), flush=True)
        records.append(rec)
        out.write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
