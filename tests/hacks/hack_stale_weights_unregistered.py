"""Attack: hack_stale_weights, with the weights kept out of the state_dict. nn.Linear is built under
the Verifier's seed (so the draws equal the reference's), then its tensors are kept as plain
attributes and the layer dropped: the state_dicts no longer match, the reference's weights are never
loaded, so the weights-changed check never runs. A model loaded from a checkpoint (load_state_dict)
or trained would silently keep computing with the random initial weights."""
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)
        self._w = lin.weight.detach().clone()
        self._b = lin.bias.detach().clone()

    def _apply(self, fn, recurse=True):  # .to(device) still moves the kept tensors
        self._w, self._b = fn(self._w), fn(self._b)
        return super()._apply(fn, recurse)

    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        w, b = self._w, self._b
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("linear_relu", x, w, b, out, x.shape[0], x.shape[1], w.shape[0])
        return out
