"""One autoregressive decode step with a KV cache: new token's q/k/v, RoPE at position = cache length (interleaved pairs via view_as_real-free stack/flatten), torch.cat of past and new k/v, single-query attention over the cache, returns output and the grown cache."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_interleaved(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Model(nn.Module):
    def __init__(self, dim=256, heads=8, past_len=63):
        super().__init__()
        self.h, self.hd, self.pos = heads, dim // heads, past_len
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv)

    def forward(self, x, past_k, past_v):
        B = x.shape[0]
        q, k, v = self.wqkv(x).view(B, 1, 3, self.h, self.hd).unbind(2)
        ang = self.pos * self.inv_freq
        cos, sin = ang.cos(), ang.sin()
        q, k = rope_interleaved(q, cos, sin), rope_interleaved(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        o = F.scaled_dot_product_attention(q, k, v)
        o = o.transpose(1, 2).reshape(B, 1, -1)
        return self.wo(o), k, v


def get_inputs():
    return [torch.randn(4, 1, 256), torch.randn(4, 8, 63, 32), torch.randn(4, 8, 63, 32)]


def get_init_inputs():
    return []
