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
    """Classifier-free guided denoiser step: batch doubled (cond / null class embedding), FiLM conv block with (1+scale, shift) from time+class embedding, guidance combine uncond + w*(cond-uncond)."""
    def __init__(self, ch=64, n_classes=10, emb=128, guidance=4.0):
        super().__init__()
        self.emb_dim, self.w = emb, guidance
        self.time_mlp = nn.Sequential(nn.Linear(emb, emb), nn.SiLU(), nn.Linear(emb, emb))
        self.class_emb = nn.Embedding(n_classes + 1, emb)
        self.null_id = n_classes
        self.conv_in = nn.Conv2d(3, ch, 3, padding=1)
        self.norm = nn.GroupNorm(8, ch, affine=False)
        self.film = nn.Linear(emb, 2 * ch)
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.conv_out = nn.Conv2d(ch, 3, 3, padding=1)
    def forward(self, x, t, y):
        xx = torch.cat([x, x], 0)
        tt = torch.cat([t, t], 0)
        yy = torch.cat([y, torch.full_like(y, self.null_id)], 0)
        c = self.time_mlp(timestep_embedding(tt, self.emb_dim)) + self.class_emb(yy)
        scale, shift = self.film(F.silu(c))[:, :, None, None].chunk(2, dim=1)
        h = self.conv_in(xx)
        h = self.norm(h) * (1 + scale) + shift
        h = h + self.conv(F.silu(h))
        eps = self.conv_out(F.silu(h))
        cond, uncond = eps.chunk(2, dim=0)
        return uncond + self.w * (cond - uncond)

def get_inputs():
    return [torch.randn(4, 3, 32, 32), torch.randint(0, 1000, (4,), dtype=torch.int64), torch.randint(0, 10, (4,), dtype=torch.int64)]

def get_init_inputs():
    return [64, 10, 128, 4.0]
