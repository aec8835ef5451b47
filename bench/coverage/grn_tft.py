"""Temporal Fusion Transformer gated residual network: Linear(a) + Linear(context), ELU, Linear, GLU gate, skip projection, add, LayerNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_in=64, d_h=160, d_out=160, d_ctx=160):
        super().__init__()
        self.skip = nn.Linear(d_in, d_out)
        self.fc1 = nn.Linear(d_in, d_h)
        self.ctx = nn.Linear(d_ctx, d_h, bias=False)
        self.fc2 = nn.Linear(d_h, d_h)
        self.gate = nn.Linear(d_h, 2 * d_out)
        self.norm = nn.LayerNorm(d_out)

    def forward(self, a, c):
        h = F.elu(self.fc1(a) + self.ctx(c).unsqueeze(1))
        h = F.glu(self.gate(self.fc2(h)), dim=-1)
        return self.norm(self.skip(a) + h)


def get_inputs():
    return [torch.randn(32, 192, 64), torch.randn(32, 160)]


def get_init_inputs():
    return []
