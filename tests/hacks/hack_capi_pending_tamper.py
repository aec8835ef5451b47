"""Cheat (red team round 4, 2026-12-04): its library declares Py_AddPendingCall and
PyRun_SimpleStringFlags itself (no Python.h, no ctypes.pythonapi) and schedules code that walks the
collector's lists and gives every Tolerance object rtol 0.05; the interpreter runs it just after the
call returns, with the Verifier's trampoline (runtime.Library.call) the first caller, not a file of
the candidate's. Accepted before 2026-12-04.

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
        _lib.call("capi_pending_matmul", a, b, out, a.shape[0], a.shape[1], b.shape[1], self.calls)
        self.calls += 1
        return out
