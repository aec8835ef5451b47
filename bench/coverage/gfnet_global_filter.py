import torch
import torch.nn as nn
import torch.nn.functional as F


class GlobalFilter(nn.Module):
    def __init__(self, dim, h=14, w=8):
        super().__init__()
        self.complex_weight = nn.Parameter(torch.randn(h, w, dim, 2, dtype=torch.float32) * 0.02)

    def forward(self, x):
        B, N, C = x.shape
        a = b = int(N ** 0.5)
        x = x.view(B, a, b, C).to(torch.float32)
        x = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
        weight = torch.view_as_complex(self.complex_weight)
        x = x * weight
        x = torch.fft.irfft2(x, s=(a, b), dim=(1, 2), norm="ortho")
        return x.reshape(B, N, C)


class Model(nn.Module):
    """GFNet block (Rao et al.): LayerNorm, global filter = rfft2 over the token grid, multiply by a learned
    complex filter stored as a real (h, w, C, 2) Parameter viewed with torch.view_as_complex, irfft2; MLP."""
    def __init__(self, dim=256, hw=14):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.filter = GlobalFilter(dim, hw, hw // 2 + 1)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm2(self.filter(self.norm1(x))))


def get_inputs():
    return [torch.randn(16, 196, 256)]


def get_init_inputs():
    return [256, 14]
