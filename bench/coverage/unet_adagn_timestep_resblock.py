"""Improved-DDPM (ADM) ResBlock with AdaGN: sinusoidal timestep embedding computed in forward (exp(-log(10000)*arange/half), cat cos/sin), time MLP with SiLU, per-channel (scale, shift) chunked from the embedding and applied after GroupNorm as norm(h)*(1+scale)+shift, 1x1 skip conv for the channel change."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class Model(nn.Module):
    def __init__(self, cin=64, cout=128, tdim=128):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, 4 * tdim), nn.SiLU(), nn.Linear(4 * tdim, 4 * tdim))
        self.in_norm = nn.GroupNorm(32, cin)
        self.in_conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = nn.Sequential(nn.SiLU(), nn.Linear(4 * tdim, 2 * cout))
        self.out_norm = nn.GroupNorm(32, cout)
        self.out_conv = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1)

    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.tdim))
        h = self.in_conv(F.silu(self.in_norm(x)))
        scale, shift = self.emb(emb)[:, :, None, None].chunk(2, dim=1)
        h = self.out_norm(h) * (1 + scale) + shift
        h = self.out_conv(F.silu(h))
        return self.skip(x) + h


def get_inputs():
    return [torch.randn(4, 64, 16, 16), torch.randint(0, 1000, (4,))]


def get_init_inputs():
    return []
