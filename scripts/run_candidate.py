"""Build the built-in coder's candidate for a task and run its forward a few times on the GPU: a
target for Nsight Compute (`ncu ... python3 scripts/run_candidate.py TASK.py`).

Usage (on the GPU machine, after scripts/gpu_run.sh has assembled the package):
    python3 scripts/run_candidate.py TASK.py [CALLS]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

from stitchcuda.agents.coder import builtin
from stitchcuda.agents.loop import plan_task
from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model, find_task, import_file, load_task_module

DEV = torch.device("cuda", 0)


def main() -> None:
    task = find_task(Path(sys.argv[1]))
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    cand = builtin.code(task, plan_task(task))
    if cand is None:
        raise SystemExit(f"{task.name}: the built-in coder does not cover it")
    _, cls = load_task_module(task)
    ref_mod = import_file(task.path)
    mod = import_file(cand.write(Path(tempfile.mkdtemp(prefix="run-candidate-"))))
    model = build_model(mod.ModelNew, list(ref_mod.get_init_inputs()), 42, DEV)
    args = make_inputs(ref_mod.get_inputs, 1, DEV)
    with torch.no_grad():
        for _ in range(calls):
            model(*args)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
