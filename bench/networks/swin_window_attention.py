"""Swin's window attention: tokens already partitioned into 7x7 windows, q.k^T scaled plus a
relative-position bias gathered from a learned table by a non-persistent index buffer, softmax, .v."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 96, heads: int = 3, window: int = 7):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        index = rel[:, :, 0] * (2 * window - 1) + rel[:, :, 1]
        self.register_buffer("index", index, persistent=False)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.table[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        att = (att + bias.unsqueeze(0)).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, c))


batch_size = 1024  # windows: 16 images of 56x56 tokens


def get_inputs():
    return [torch.randn(batch_size, 49, 96)]


def get_init_inputs():
    return []
