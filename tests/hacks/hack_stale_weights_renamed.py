"""Attack: hack_stale_weights (a copy of the weights taken on the first call, used forever) with the
layer renamed (self.lin, not self.linear): the state_dict keys differ from the reference's, the
weights are never loaded, and the weights-changed check that catches hack_stale_weights never runs."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.lin = nn.Linear(in_features, out_features)
        self._kept = None

    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        if self._kept is None:
            self._kept = (self.lin.weight.detach().clone(), self.lin.bias.detach().clone())
        w, b = self._kept
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("linear_relu", x, w, b, out, x.shape[0], x.shape[1], w.shape[0])
        return out
