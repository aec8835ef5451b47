"""Mamba-2 SSD minimal (the 'ssd_minimal_discrete' reference, one chunk): segsum via cumsum and a -inf masked_fill of the upper triangle, L = exp(segsum(A)), Y = einsum('bclhn,bcshn,bhcls,bcshp->bclhp', C, B, L, X), gated RMSNorm (y * silu(z)) and out projection."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def segsum(x):
    T = x.size(-1)
    x = x[..., None].expand(*x.shape, T)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    s = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=0)
    return s.masked_fill(~mask, -torch.inf)


class Model(nn.Module):
    def __init__(self, d=128, heads=4, p=32, n=16, chunk=32):
        super().__init__()
        self.h, self.p, self.n, self.cl = heads, p, n, chunk
        self.in_proj = nn.Linear(d, 2 * heads * p + 2 * n + heads, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.linspace(1, 8, heads)))
        self.dt_bias = nn.Parameter(torch.zeros(heads))
        self.norm_w = nn.Parameter(torch.ones(heads * p))
        self.out = nn.Linear(heads * p, d, bias=False)

    def forward(self, u):
        b, T, _ = u.shape
        z, x, Bm, Cm, dt = self.in_proj(u).split([self.h * self.p, self.h * self.p, self.n, self.n, self.h], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # b, T, h
        A = -torch.exp(self.A_log)
        X = (x.view(b, T, self.h, self.p) * dt[..., None]).view(b, T // self.cl, self.cl, self.h, self.p)
        Ad = (A * dt).view(b, T // self.cl, self.cl, self.h).permute(0, 3, 1, 2)  # b h c l
        Bc = Bm.view(b, T // self.cl, self.cl, 1, self.n).expand(-1, -1, -1, self.h, -1)
        Cc = Cm.view(b, T // self.cl, self.cl, 1, self.n).expand(-1, -1, -1, self.h, -1)
        L = torch.exp(segsum(Ad))
        Y = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Cc, Bc, L, X).reshape(b, T, self.h * self.p)
        y = Y * F.silu(z)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * self.norm_w
        return self.out(y)


def get_inputs():
    return [torch.randn(2, 64, 128)]


def get_init_inputs():
    return []
