import torch
import torch.nn as nn

class Model(nn.Module):
    """where with comparison masks, clamp with tensor bounds, lerp, addcmul (EMA/optimizer-style arithmetic)."""
    def __init__(self, d=256):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.lo = nn.Parameter(-torch.rand(d))
        self.hi = nn.Parameter(torch.rand(d))
        self.register_buffer('ema', torch.zeros(d))
    def forward(self, x, y):
        h = self.fc(x)
        h = torch.where(h > 0, h, 0.1 * h)
        h = torch.clamp(h, min=self.lo, max=self.hi)
        h = torch.lerp(h, y, 0.3)
        h = torch.addcmul(h, y, x, value=0.5)
        h = torch.where(x.abs() < 1e-3, torch.zeros_like(h), h)
        return torch.lerp(h, self.ema.expand_as(h), torch.sigmoid(y))

def get_inputs():
    return [torch.randn(64, 256), torch.randn(64, 256)]

def get_init_inputs():
    return [256]
