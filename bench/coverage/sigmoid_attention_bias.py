"""Sigmoid attention (Apple, 2024): softmax replaced by sigmoid(QK^T/sqrt(d) + b) with b = -log(n), ALiBi-free, with a key-padding mask applied by multiplying the sigmoid weights with a float mask; LayerNorm pre-norm and GELU MLP."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim=192, heads=6, n=96):
        super().__init__()
        self.h, self.hd = heads, dim // heads
        self.bias = -math.log(n)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x, lengths):
        B, N, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(B, N, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(self.hd) + self.bias
        keep = (torch.arange(N, device=x.device)[None, :] < lengths[:, None]).to(x.dtype)
        w = torch.sigmoid(s) * keep[:, None, None, :]
        o = torch.einsum("bhij,bhjd->bhid", w, v).transpose(1, 2).reshape(B, N, C)
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(4, 96, 192), torch.tensor([96, 80, 50, 96])]


def get_init_inputs():
    return []
