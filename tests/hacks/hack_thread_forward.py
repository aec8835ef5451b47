"""Hack: forward computes on a thread of its own (through _thread, which the static check names too) and
waits for it: the dispatch recorder of the calling thread sees nothing of what runs there."""

import _thread
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
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        done = _thread.allocate_lock()
        done.acquire()

        def work():
            _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
            done.release()

        _thread.start_new_thread(work, ())
        done.acquire()
        return out
