import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Instant-NGP multiresolution hash encoding in pure PyTorch (torch-ngp / nerfacc-style fallback): per level a
    resolution from a geometric growth factor, floor of scaled coordinates (int64), 8 cube corners from a
    bit-pattern buffer, spatial hash (x*1 ^ y*2654435761 ^ z*805459861) % T with bitwise_xor on int64, embedding
    lookup by index into one (L*T, F) table with per-level offsets, trilinear weights by prod over xyz, sum; then the
    NeRF density MLP and a spherical-harmonics-free colour MLP on cat(features, frequency-encoded view dirs)."""
    def __init__(self, n_levels=8, n_feat=2, log2_T=14, base_res=16, max_res=512, hidden=64, n_freq=4):
        super().__init__()
        self.L, self.F, self.T = n_levels, n_feat, 2 ** log2_T
        b = math.exp((math.log(max_res) - math.log(base_res)) / (n_levels - 1))
        self.register_buffer("res", torch.tensor([math.floor(base_res * b ** l) for l in range(n_levels)], dtype=torch.float32))
        self.register_buffer("offsets", torch.arange(n_levels) * self.T)
        corners = torch.tensor([[(i >> 0) & 1, (i >> 1) & 1, (i >> 2) & 1] for i in range(8)], dtype=torch.long)
        self.register_buffer("corners", corners)
        self.register_buffer("primes", torch.tensor([1, 2654435761, 805459861], dtype=torch.long))
        self.embeddings = nn.Parameter(torch.empty(n_levels * self.T, n_feat).uniform_(-1e-4, 1e-4) * 1e3)
        self.register_buffer("freq_bands", 2.0 ** torch.arange(n_freq, dtype=torch.float32) * math.pi)
        self.sigma_net = nn.Sequential(nn.Linear(n_levels * n_feat, hidden), nn.ReLU(), nn.Linear(hidden, 1 + 15))
        self.color_net = nn.Sequential(nn.Linear(15 + 3 + 6 * n_freq, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                       nn.ReLU(), nn.Linear(hidden, 3))

    def encode(self, x):
        # x in [0, 1]^3, (N, 3)
        xs = x[:, None, :] * self.res[None, :, None]                     # N L 3
        x0 = torch.floor(xs)
        frac = xs - x0
        x0 = x0.long()
        pos = x0[:, :, None, :] + self.corners[None, None]                  # N L 8 3
        h = pos * self.primes
        idx = torch.bitwise_xor(torch.bitwise_xor(h[..., 0], h[..., 1]), h[..., 2]) % self.T
        idx = idx + self.offsets[None, :, None]                             # N L 8
        feats = F.embedding(idx, self.embeddings)                           # N L 8 F
        c = self.corners[None, None].to(x.dtype)                            # 1 1 8 3
        w = torch.where(c > 0, frac[:, :, None, :], 1 - frac[:, :, None, :]).prod(dim=-1)
        return (feats * w[..., None]).sum(dim=2).flatten(1)                 # N L*F

    def forward(self, x, d):
        h = self.sigma_net(self.encode(x))
        sigma = F.softplus(h[..., 0] - 1.0)
        geo = h[..., 1:]
        de = d[..., None] * self.freq_bands
        d_enc = torch.cat([d, torch.sin(de).flatten(1), torch.cos(de).flatten(1)], dim=-1)
        rgb = torch.sigmoid(self.color_net(torch.cat([geo, d_enc], dim=-1)))
        return sigma, rgb


def get_inputs():
    d = F.normalize(torch.randn(16384, 3), dim=-1)
    return [torch.rand(16384, 3), d]


def get_init_inputs():
    return [8, 2, 14, 16, 512, 64, 4]
