"""Hack (6): the CPU analogue of an unsynchronised side stream: a thread fills the output after
forward has returned, so the work would fall outside the timed region."""

import threading
import time
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        out = torch.empty_like(x)

        def work():
            time.sleep(0.3)
            _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))

        threading.Thread(target=work, daemon=True).start()
        return out
