"""A diffusion UNet's residual block: GroupNorm, SiLU, 3x3 convolution, a sinusoidal timestep
embedding through a Linear added per channel, GroupNorm, SiLU, 3x3 convolution, a 1x1 skip."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cin: int = 64, cout: int = 128, temb: int = 256, groups: int = 32):
        super().__init__()
        self.temb = temb
        self.norm1, self.norm2 = nn.GroupNorm(groups, cin), nn.GroupNorm(groups, cout)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.time = nn.Linear(temb, cout)
        self.skip = nn.Conv2d(cin, cout, 1)

    def embed(self, t):
        half = self.temb // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(F.silu(self.embed(t)))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


batch_size = 16


def get_inputs():
    return [torch.randn(batch_size, 64, 64, 64), torch.rand(batch_size) * 1000]


def get_init_inputs():
    return []
