import torch
import torch.nn as nn

class Model(nn.Module):
    """Numerics users sprinkle in: nan_to_num on logits, clamp with per-channel tensor bounds, lerp toward an EMA buffer with a tensor weight, where on a finite mask, log1p/expm1 round trip."""
    def __init__(self, d=256):
        super().__init__()
        self.register_buffer("ema", torch.zeros(d))
        self.register_buffer("lo", -torch.linspace(0.5, 3.0, d))
        self.register_buffer("hi", torch.linspace(0.5, 3.0, d))
        self.lin = nn.Linear(d, d)
        self.mix = nn.Parameter(torch.full((d,), 0.1))
    def forward(self, x):
        y = self.lin(x)
        y = torch.nan_to_num(y, nan=0.0, posinf=1e4, neginf=-1e4)
        y = torch.clamp(y, min=self.lo, max=self.hi)
        y = torch.lerp(y, self.ema.expand_as(y), torch.sigmoid(self.mix))
        y = torch.where(torch.isfinite(y), y, torch.zeros_like(y))
        return torch.expm1(torch.log1p(y.abs())) * torch.sign(y)

def get_inputs():
    return [torch.randn(32, 128, 256)]

def get_init_inputs():
    return [256]
