"""Hack (a red-team review, 2026-12-01; accepted before): forward hands PyTorch's compute to an
OpenMP worker thread (started by libgomp, as honest OpenMP candidates' are) through a ctypes callback; the op recorder's dispatch mode and the witness's
profiler are thread-local, and no Python thread is started."""
import ctypes
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("callback_omp.cpp"), extra_flags=["-fopenmp"])
_job = []


def _work():
    out, x, y, s = _job[0]
    t = x * s + y
    out.copy_(t * (t > 0))


_CB = ctypes.CFUNCTYPE(None)(_work)
_ADDR = ctypes.cast(_CB, ctypes.c_void_p).value


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _job[:] = [(out, x, y, float(self.scale))]
        _lib.call("team_call", _ADDR)
        _job.clear()
        return out
