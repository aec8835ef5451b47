"""Hand-written decoder layer: causal self-attention (SDPA is_causal), cross-attention over encoder memory, GELU FFN, post-LN."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.o = nn.Linear(d, d)

    def forward(self, x, mem, causal):
        b, t, d = x.shape
        s = mem.shape[1]
        q = self.q(x).view(b, t, self.h, d // self.h).transpose(1, 2)
        k, v = self.kv(mem).chunk(2, dim=-1)
        k = k.view(b, s, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, s, self.h, d // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class Model(nn.Module):
    def __init__(self, d=384, h=6):
        super().__init__()
        self.sa = Attn(d, h)
        self.ca = Attn(d, h)
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mem):
        x = self.n1(x + self.sa(x, x, True))
        x = self.n2(x + self.ca(x, mem, False))
        return self.n3(x + self.ff(x))


def get_inputs():
    return [torch.randn(8, 100, 384), torch.randn(8, 160, 384)]


def get_init_inputs():
    return []
