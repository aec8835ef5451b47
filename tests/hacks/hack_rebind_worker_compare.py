"""Cheat: the worker runs as __main__; rebinding its comparison makes any output match, and forward
does no work."""
import torch
import torch.nn as nn

import __main__
from stitchcuda.agents.verify.compare import Mismatch

if hasattr(__main__, "compare_outputs"):
    __main__.compare_outputs = lambda ref, got, tol: Mismatch(True, "match")
    __main__._follow_inputs_findings = lambda *a, **k: []


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return torch.zeros_like(x)
