"""The process Nsight Compute profiles: a verified candidate's forward, a few times, nothing else.

Usage: python -m stitchcuda.profiling.ncu_target REQUEST.json REPEATS
REQUEST.json is the Verifier's worker request (reference path, candidate module). Inputs are made
the way the Verifier makes them; weights do not matter for the profile, so the reference is not
built. ncu replays each launch to collect its counters, so no warm-up is needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from stitchcuda.inputs import make_inputs
from stitchcuda.task import build_model, import_file


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[0]).read_text())
    repeats = int(argv[1]) if len(argv) > 1 else 1
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.set_grad_enabled(False)
    ref_mod = import_file(Path(req["reference"]))
    cand_mod = import_file(Path(req["candidate"]))
    cand_cls = getattr(cand_mod, req.get("candidate_class", "ModelNew"))
    model = build_model(cand_cls, list(ref_mod.get_init_inputs()), int(req.get("init_seed", 42)), device,
                        req.get("module_mode"))
    inputs = make_inputs(ref_mod.get_inputs, 1, device)
    for _ in range(repeats):
        model(*inputs)
    torch.cuda.synchronize(device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
