"""The fast path's outputs made by the call before (FastPath.ahead) against made in the call, timed as
the Verifier times a trial, with torch.compile beside them in the same process.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_outputs_ahead.py OUT.json TASK.py [TASK.py ...]
For each task: the built-in candidate written twice, with STITCHCUDA_OUTPUTS_AHEAD=0 (`in_call`) and
with the default (`ahead`), both loaded in this process, and torch.compile of the reference (default
settings). Each trial is timing.time_cuda's: the Verifier's L2 flush, a synchronise, events around
the call, the call's host time beside it. The three calls are interleaved trial by trial, so a drift
of the machine reaches each alike. Records the median timed and host microseconds of each, and the
ratios torch.compile / each.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from probe_records import Records, built_candidate, reference_and_candidate, timed_call

from stitchcuda.agents.verify.timing import L2Flusher

DEV = torch.device("cuda", 0)
TRIALS = 80
SETTING = "STITCHCUDA_OUTPUTS_AHEAD"


def candidate(task_file: Path, ahead: bool) -> tuple[Any, Path, str]:
    before = os.environ.pop(SETTING, None)
    if not ahead:
        os.environ[SETTING] = "0"
    try:
        task, _, path = built_candidate(task_file, "outputs-ahead-")
    finally:
        os.environ.pop(SETTING, None)
        if before is not None:
            os.environ[SETTING] = before
    made_ahead = "f.ahead.pop(" in path.read_text()
    if made_ahead != ahead:
        raise RuntimeError(f"the candidate written with ahead={ahead} has ahead={made_ahead}")
    return task, path, path.read_text()


def timed(fns: dict[str, Any], flusher: L2Flusher) -> dict[str, float]:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    got: dict[str, tuple[list[float], list[float]]] = {f: ([], []) for f in fns}
    for fn in fns.values():  # warm: module load, autotune, the fast path armed
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    for _ in range(TRIALS):
        for f, fn in fns.items():
            flusher()
            timed_us, host_us = timed_call(fn, start, end)
            got[f][0].append(timed_us)
            got[f][1].append(host_us)
    res: dict[str, float] = {}
    for f, (t, h) in got.items():
        res[f"{f}_timed_us"] = round(statistics.median(t), 2)
        res[f"{f}_host_us"] = round(statistics.median(h), 2)
    for f in fns:
        if f != "compile":
            res[f"compile_over_{f}"] = round(res["compile_timed_us"] / res[f"{f}_timed_us"], 4)
    return res


def main() -> None:
    out_path = Path(sys.argv[1])
    torch.set_grad_enabled(False)
    records = Records(out_path)
    flusher = L2Flusher(DEV)
    for f in sys.argv[2:]:
        with records.task(task=f) as rec:
            fns: dict[str, Any] = {}
            ref = args = None
            for name, ahead in (("in_call", False), ("ahead", True)):
                task, path, _ = candidate(Path(f), ahead)
                ref_here, ours, args_here = reference_and_candidate(
                    Path(f), task.class_name, path, DEV, f"_probe_{Path(f).stem}_{name}")
                if ref is None:  # one reference and one input set for both
                    ref, args = ref_here, args_here
                ours.load_state_dict(ref.state_dict())
                want, got = ref(*args), ours(*args)
                torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
                fns[name] = lambda m=ours, a=args: m(*a)
            compiled = torch.compile(ref)
            fns["compile"] = lambda m=compiled, a=args: m(*a)
            rec.update(timed(fns, flusher))


if __name__ == "__main__":
    main()
