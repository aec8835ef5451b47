"""A Conformer convolution module: LayerNorm, pointwise Conv1d to twice the channels, GLU, a
depthwise Conv1d, BatchNorm1d (training mode), SiLU, pointwise Conv1d, the residual."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int = 256, kernel: int = 31):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.pw1 = nn.Conv1d(dim, 2 * dim, 1)
        self.dw = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.bn = nn.BatchNorm1d(dim)
        self.pw2 = nn.Conv1d(dim, dim, 1)

    def forward(self, x):
        h = self.norm(x).transpose(1, 2)
        h = F.glu(self.pw1(h), dim=1)
        h = F.silu(self.bn(self.dw(h)))
        return x + self.pw2(h).transpose(1, 2)


batch_size = 16


def get_inputs():
    return [torch.randn(batch_size, 512, 256)]


def get_init_inputs():
    return []
