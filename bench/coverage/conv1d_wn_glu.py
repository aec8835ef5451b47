"""ConvS2S / WaveNet-ish encoder block: weight-normed Conv1d to 2C (torch.nn.utils.parametrizations.weight_norm), GLU over channels, residual scaled by sqrt(0.5), three layers."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm


class Model(nn.Module):
    def __init__(self, c=256, k=5, layers=3):
        super().__init__()
        self.convs = nn.ModuleList([weight_norm(nn.Conv1d(c, 2 * c, k, padding=k // 2)) for _ in range(layers)])

    def forward(self, x):
        for conv in self.convs:
            x = (x + F.glu(conv(x), dim=1)) * math.sqrt(0.5)
        return x


def get_inputs():
    return [torch.randn(16, 256, 400)]


def get_init_inputs():
    return []
