"""Hack (GPU): launches its kernel on a stream of its own and does not make the caller's stream
wait for it, so the timer's end event does not wait for the work either."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"), libraries=["cublas"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.side = torch.cuda.Stream()

    def forward(self, x, y):
        out = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
