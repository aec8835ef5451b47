"""Gated linear attention (GLA, Yang et al. 2024) parallel form: data-dependent log-decay from a low-rank logsigmoid gate, cumulative log gates by cumsum over time, q * exp(G) and k * exp(-G), causal (tril) masked scores, RMSNorm-ed output gated by swish(g)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=128, heads=4, rank=16):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q, self.k, self.v, self.g = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gk = nn.Sequential(nn.Linear(d, rank, bias=False), nn.Linear(rank, d))
        self.norm = nn.RMSNorm(self.dk, eps=1e-5)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        sh = lambda t: t.view(B, T, self.h, self.dk).transpose(1, 2)
        q, k, v = sh(self.q(x)) * self.dk ** -0.5, sh(self.k(x)), sh(self.v(x))
        gk = sh(F.logsigmoid(self.gk(x)) / 16.0)
        G = torch.cumsum(gk, dim=2)  # B, H, T, dk (<= 0, decreasing)
        qg, kg = q * torch.exp(G), k * torch.exp(-G)
        s = qg @ kg.transpose(-1, -2)
        s = s.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device)), 0.0)
        o = self.norm(s @ v).transpose(1, 2).reshape(B, T, D)
        return self.o(o * F.silu(self.g(x)))


def get_inputs():
    return [torch.randn(2, 64, 128)]


def get_init_inputs():
    return []
