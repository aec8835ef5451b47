"""Cheat: adds compute ops to the Verifier's table of ops a candidate may dispatch (updated in place,
not rebound), then computes with PyTorch."""
import torch.nn as nn

from stitchcuda.agents.verify.torch_ops import ALLOWED_ATEN

ALLOWED_ATEN.update({"mul", "add", "clamp_min", "relu"})


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return (x * self.scale + y).clamp_min(0)
