import torch
import torch.nn as nn


def round_ste(z):
    zhat = z.round()
    return z + (zhat - z).detach()


class Model(nn.Module):
    """Finite Scalar Quantization (Mentzer et al. 2023, lucidrains vector-quantize-pytorch FSQ): conv encoder output
    rearranged 'b d h w -> b (h w) d', project_in, bound with tanh and per-dim half-levels / offsets (atanh of a
    tensor), round with the straight-through estimator, normalise, codes to int64 indices via a cumprod basis buffer,
    project_out, back to an image; conv decoder."""
    def __init__(self, c=128, levels=(8, 5, 5, 5)):
        super().__init__()
        lv = torch.tensor(levels, dtype=torch.int32)
        self.register_buffer("_levels", lv, persistent=False)
        self.register_buffer("_basis", torch.cumprod(torch.tensor([1] + list(levels[:-1])), dim=0, dtype=torch.int32), persistent=False)
        self.enc = nn.Sequential(nn.Conv2d(3, c, 4, 2, 1), nn.SiLU(), nn.Conv2d(c, c, 3, 1, 1))
        self.project_in = nn.Linear(c, len(levels))
        self.project_out = nn.Linear(len(levels), c)
        self.dec = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.SiLU(), nn.ConvTranspose2d(c, 3, 4, 2, 1))

    def bound(self, z, eps=1e-3):
        half_l = (self._levels - 1) * (1 + eps) / 2
        offset = torch.where(self._levels % 2 == 0, 0.5, 0.0)
        shift = (offset / half_l).atanh()
        return (z + shift).tanh() * half_l - offset

    def forward(self, x):
        z = self.enc(x)
        B, C, H, W = z.shape
        z = z.permute(0, 2, 3, 1).reshape(B, H * W, C)
        z = self.project_in(z)
        half_width = self._levels // 2
        codes = round_ste(self.bound(z)) / half_width
        zhat = (codes * half_width) + half_width
        indices = (zhat * self._basis).sum(dim=-1).to(torch.int64)
        out = self.project_out(codes).reshape(B, H, W, C).permute(0, 3, 1, 2)
        return self.dec(out), indices


def get_inputs():
    return [torch.randn(8, 3, 64, 64)]


def get_init_inputs():
    return [128, (8, 5, 5, 5)]
