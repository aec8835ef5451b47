"""Where a small module's timed forward grows between a plain process and the Verifier's worker.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_worker_gap.py OUT.json TASK.py [TASK.py ...]
For each task the built-in candidate is written and built once, then timed (timing.time_cuda: L2
flushed, synchronised, events, median of 50; each trial's host time in its window beside it):
- `plain`: in this process, as scripts/probe_ab.py times it;
- `checked`: in this process with the worker's per-trial work between calls (its output statistics
  read and the generators seeded), which leaves the host path cold for the next call;
- `worker`: through the Verifier (its worker process, sandbox and watches), without torch.compile's
  baseline, the blind check or Nsight Compute, once per variant of the worker's environment:
  default, no sandbox, no native thread watch, and on two held timing CPUs as a bench holds them.
Each variant's verdict gives ours_ms, ours' in-window host time, and the worker's host_us.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from probe_records import Records, built_candidate

from stitchcuda import timing_cpus
from stitchcuda.agents.verify import dynamic_check as dyn
from stitchcuda.agents.verify.sandbox import OFF_ENV as NO_SANDBOX
from stitchcuda.agents.verify.timing import L2Flusher, time_cuda
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model, find_task, import_file

DEV = torch.device("cuda", 0)
VARIANTS: dict[str, dict[str, str]] = {
    "worker": {},
    "worker_no_sandbox": {NO_SANDBOX: "1"},
    "worker_no_native_watch": {"STITCHCUDA_NATIVE_THREAD_WATCH": "0"},
    "worker_held_cpus": {timing_cpus.ENV: "2,3"},
}


def in_process(path: Path, task_file: Path) -> dict[str, Any]:
    ref_mod = import_file(task_file)
    init = list(ref_mod.get_init_inputs())
    ref = build_model(getattr(ref_mod, find_task(task_file).class_name), init, 42, DEV)
    model = build_model(import_file(path).ModelNew, init, 42, DEV)
    model.load_state_dict(ref.state_dict())
    sets = [make_inputs(ref_mod.get_inputs, s, DEV) for s in (1, 2)]
    flusher = L2Flusher(DEV)
    out: dict[str, Any] = {}
    plain, _ = time_cuda(lambda a: model(*a), sets, trials=50, flusher=flusher)
    out["plain"] = {"ours_us": round(plain.median_ms * 1e3, 2), "host_us": round((plain.host_ms or 0) * 1e3, 2)}

    def check(i: int, o: Any) -> None:
        dyn.output_stats(dyn.flatten_outputs(o))

    checked, _ = time_cuda(lambda a: model(*a), sets, trials=50, flusher=flusher, check=check,
                           before=lambda i: torch.manual_seed(1000 + i))
    out["checked"] = {"ours_us": round(checked.median_ms * 1e3, 2),
                      "host_us": round((checked.host_ms or 0) * 1e3, 2)}
    return out


def through_worker(task, cand, env: dict[str, str]) -> dict[str, Any]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        opts = VerifyOptions(gpu=0, time_compile=False, profile=False, timeout_s=300)
        os.environ["STITCHCUDA_BLIND_CHECK"] = "0"
        v = verify(task, cand, Path(tempfile.mkdtemp(prefix="gap-")), opts)
    finally:
        for k, was in saved.items():
            if was is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = was
    rec: dict[str, Any] = {"status": v.status, "sandboxed": v.sandboxed if hasattr(v, "sandboxed") else None}
    if v.ours:
        rec["ours_us"] = round(v.ours.median_ms * 1e3, 2)
        rec["host_us"] = round((v.ours.host_ms or 0) * 1e3, 2)
    if v.ours_gpu:
        rec["gpu_ahead_us"] = round(v.ours_gpu.median_ms * 1e3, 2)
    rec["worker_host_us"] = dict(v.host_us)
    if v.status != "ok":
        rec["message"] = v.message[:300]
    return rec


def main() -> None:
    out_path = Path(sys.argv[1])
    torch.set_grad_enabled(False)
    records = Records(out_path)
    for f in sys.argv[2:]:
        with records.task(task=f) as rec:
            task, cand, path = built_candidate(Path(f), "gap-cand-")
            rec.update(in_process(path, Path(f)))
            for name, env in VARIANTS.items():
                rec[name] = through_worker(task, cand, env)
            rec.update({f"{k}_again": v for k, v in in_process(path, Path(f)).items()})


if __name__ == "__main__":
    main()
