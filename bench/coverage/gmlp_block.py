"""gMLP block: LayerNorm, Linear to 2x, GELU (tanh approximation), chunk, spatial gating unit (LayerNorm on v, Linear over tokens via transpose, u * v), Linear back, residual."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=256, d_ffn=1024, tokens=196):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.proj_in = nn.Linear(d, 2 * d_ffn)
        self.sgu_norm = nn.LayerNorm(d_ffn)
        self.spatial = nn.Linear(tokens, tokens)
        nn.init.constant_(self.spatial.bias, 1.0)
        self.proj_out = nn.Linear(d_ffn, d)

    def forward(self, x):
        h = F.gelu(self.proj_in(self.norm(x)), approximate="tanh")
        u, v = h.chunk(2, dim=-1)
        v = self.spatial(self.sgu_norm(v).transpose(1, 2)).transpose(1, 2)
        return x + self.proj_out(u * v)


def get_inputs():
    return [torch.randn(16, 196, 256)]


def get_init_inputs():
    return []
