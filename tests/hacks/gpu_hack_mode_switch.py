"""Hostile (GPU; a red-team review, 2026-11-28): its own kernel only while a TorchDispatchMode (the op recorder) is on; PyTorch otherwise
(the timed calls, the parked and timing-floor profiles)."""
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"), libraries=["cublas"])
_RELU = getattr(torch, "re" + "lu")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        # The probe by a computed name, so the static check cannot read it: only the mode-free profiles can.
        probe = getattr(getattr(torch.utils, "_python_" + "dispatch"), "_get_current_" + "dispatch_mode")
        if probe() is None:
            return _RELU(x * self.scale + y)
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
