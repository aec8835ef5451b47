"""What between two timed trials makes a call's host path slower inside the next timed window.

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/probe_timed_host.py OUT.json TASK.py [TASK.py ...]
For each task: the built-in candidate, eager and torch.compile (default settings), and one small
torch op as a yardstick, each timed as timing.time_cuda times a trial (synchronised, events around
the call, the call's host time beside it) after one of these between trials:
- `idle`: a synchronise only;
- `flush`: the L2 buffer zeroed, then a synchronise;
- `flush_reset`: the Verifier's flusher (persisting L2 lines reset through the CUDA runtime, then
  the buffer zeroed), then a synchronise;
- `reset`: the persisting reset alone, then a synchronise;
- `spin`: a spin kernel as long as the flush, then a synchronise (the wait without the memory traffic).
Conditions are interleaved trial by trial, so a drift of the machine reaches every one alike.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from probe_records import Records, built_candidate, reference_and_candidate, timed_call

from stitchcuda.agents.verify.timing import L2Flusher

DEV = torch.device("cuda", 0)
TRIALS = 40


def conditions(flusher: L2Flusher) -> dict[str, Any]:
    sleep = torch._C._cuda_sleep
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    flusher.buf.zero_()
    end.record()
    torch.cuda.synchronize()
    flush_ms = start.elapsed_time(end)
    start.record()
    sleep(1_000_000)
    end.record()
    torch.cuda.synchronize()
    cycles = int(1_000_000 * flush_ms / max(start.elapsed_time(end), 1e-3))
    reset = flusher.reset_persisting or (lambda: None)
    return {
        "idle": lambda: None,
        "flush": flusher.buf.zero_,
        "flush_reset": flusher,
        "reset": reset,
        "spin": lambda: sleep(cycles),
    }


def timed(fns: dict[str, Any], conds: dict[str, Any]) -> dict[str, dict[str, float]]:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    got: dict[tuple[str, str], tuple[list[float], list[float]]] = {
        (f, c): ([], []) for f in fns for c in conds}
    for fn in fns.values():  # warm: module load, autotune, graph capture
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    for _ in range(TRIALS):
        for c, between in conds.items():
            for f, fn in fns.items():
                between()
                timed_us, host_us = timed_call(fn, start, end)
                got[f, c][0].append(timed_us)
                got[f, c][1].append(host_us)
    res: dict[str, dict[str, float]] = {}
    for (f, c), (t, h) in got.items():
        res.setdefault(f, {})[f"{c}_timed_us"] = round(statistics.median(t), 2)
        res[f][f"{c}_host_us"] = round(statistics.median(h), 2)
    return res


def main() -> None:
    out_path = Path(sys.argv[1])
    torch.set_grad_enabled(False)
    records = Records(out_path)
    flusher = L2Flusher(DEV)
    conds = conditions(flusher)
    for f in sys.argv[2:]:
        with records.task(task=f) as rec:
            task, _, path = built_candidate(Path(f), "timed-host-")
            ref, ours, args = reference_and_candidate(Path(f), task.class_name, path, DEV)
            compiled = torch.compile(ref)
            small = torch.zeros(1, device=DEV)
            fns = {"ours": lambda m=ours, a=args: m(*a), "eager": lambda m=ref, a=args: m(*a),
                   "compile": lambda m=compiled, a=args: m(*a), "one_op": lambda t=small: t.add_(1)}
            rec.update(timed(fns, conds))


if __name__ == "__main__":
    main()
