"""A ConvNeXt block: depthwise 7x7 convolution, channels-last LayerNorm through permutes, a 4x
pointwise MLP with GELU as Linears, a layer-scale vector, the residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 96):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))

    def forward(self, x):
        h = self.dw(x).permute(0, 2, 3, 1)
        h = self.pw2(nn.functional.gelu(self.pw1(self.norm(h))))
        return x + (self.gamma * h).permute(0, 3, 1, 2)


batch_size = 16


def get_inputs():
    return [torch.randn(batch_size, 96, 56, 56)]


def get_init_inputs():
    return []
