import math
import torch
import torch.nn as nn

def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

class Model(nn.Module):
    def __init__(self, ch=128, tdim=128, out_ch=128):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, tdim * 4), nn.SiLU(), nn.Linear(tdim * 4, tdim * 4))
        self.in_layers = nn.Sequential(nn.GroupNorm(32, ch), nn.SiLU(), nn.Conv2d(ch, out_ch, 3, padding=1))
        self.emb = nn.Sequential(nn.SiLU(), nn.Linear(tdim * 4, out_ch))
        self.out_layers = nn.Sequential(nn.GroupNorm(32, out_ch), nn.SiLU(), nn.Dropout(0.0),
                                        nn.Conv2d(out_ch, out_ch, 3, padding=1))
    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.tdim))
        h = self.in_layers(x)
        h = h + self.emb(emb)[:, :, None, None]
        h = self.out_layers(h)
        return x + h

def get_inputs():
    return [torch.randn(4, 128, 32, 32), torch.randint(0, 1000, (4,))]

def get_init_inputs():
    return [128, 128, 128]
