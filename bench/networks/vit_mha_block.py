"""A ViT encoder block over nn.MultiheadAttention: pre-LayerNorm, attention with its own in/out
projections, a GELU MLP, two residuals; 197 tokens (a class token and 14x14 patches)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 384, heads: int = 6):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


batch_size = 16


def get_inputs():
    return [torch.randn(batch_size, 197, 384)]


def get_init_inputs():
    return []
