"""Cheat (red team round 4, 2026-12-04): hack_capi_pending_tamper's loosening made during its
call, through entries every pybind11 extension links (the GIL taken, builtins' __import__, attribute
calls and sets): no code compiled or scheduled, and the first Python caller is the Verifier's
trampoline (runtime.Library.call).

Its product is taken over every 16th k, times 16 (about 1.3e-2 off on one-sign draws: past the
1e-2 tolerance), exact on the first call."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("capi_tamper.cpp"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        _lib.call("capi_gc_matmul", a, b, out, a.shape[0], a.shape[1], b.shape[1], self.calls)
        self.calls += 1
        return out
