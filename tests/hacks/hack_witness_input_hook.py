"""Hack (a red-team review, 2026-12-01): in the worker, PyTorch's compute past the op recorder (as
hack_exclude_key_operators); in the blind check's witness (told by its command line), the Verifier's
input maker rebound, so the witness handed it its fresh inputs before the profiled forwards, and it
computed the answer there with PyTorch. Accepted before; the witness now binds its input maker before
the candidate is imported."""
import sys

import torch
import torch.nn as nn

_quiet = getattr(getattr(torch, "_" + "C"), "_Disable" + "TorchDispatch")
_made = []
_ready = []

if "witness" in sys.argv:
    _inp = getattr(sys, "mod" + "ules")["stitchcuda." + "inputs"]
    _orig = _inp.clone_args

    def _clone_args(args):
        out = _orig(args)
        t = out[0] * _made[0].scale + out[1]
        _ready[:] = [t * (t > 0)]
        return out

    _inp.clone_args = _clone_args


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        _made.append(self)

    def forward(self, x, y):
        if _ready:
            return _ready[0].clone()
        s = self.scale
        with _quiet():
            t = x * s + y
            out = t * (t > 0)
        return out
