"""Hack: in the blind check's witness, reads the inputs' seed in a hook that runs after the inputs
are made and before the profiled forwards (load_state_dict's post-hook, outside the profiler), remakes
the inputs from it and runs the reference there; forward returns a copy of that output, with no
arithmetic the profiler could see. (A red-team review of 0121c04, 2026-12-01: the witness made its
inputs before loading the candidate's weights.)"""

import sys

import torch
import torch.nn as nn


def _precompute(module, incompatible):
    from stitchcuda.inputs import make_inputs

    seed = torch.initial_seed()
    ref = next(m for n, m in list(sys.modules.items())
               if n.startswith("_stitch_") and hasattr(m, "get_inputs") and hasattr(m, "Model"))
    device = next(module.parameters()).device
    args = make_inputs(ref.get_inputs, seed, device)
    model = ref.Model(*ref.get_init_inputs()).to(device)
    model.load_state_dict(module.state_dict())
    with torch.no_grad():
        module._out = model(*args)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._out = None
        self.register_load_state_dict_post_hook(_precompute)

    def forward(self, x):
        return self._out.clone()
