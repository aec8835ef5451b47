"""Perceiver cross-attention: learned latent array (nn.Parameter) expanded over the batch attends to the inputs (nn.MultiheadAttention with kdim/vdim), then a latent MLP."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_latents=128, d_latent=256, d_in=64, heads=4):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(n_latents, d_latent) * 0.02)
        self.norm_q = nn.LayerNorm(d_latent)
        self.norm_kv = nn.LayerNorm(d_in)
        self.attn = nn.MultiheadAttention(d_latent, heads, kdim=d_in, vdim=d_in, batch_first=True)
        self.norm_mlp = nn.LayerNorm(d_latent)
        self.mlp = nn.Sequential(nn.Linear(d_latent, 4 * d_latent), nn.GELU(), nn.Linear(4 * d_latent, d_latent))

    def forward(self, x):
        b = x.shape[0]
        lat = self.latents.unsqueeze(0).expand(b, -1, -1)
        kv = self.norm_kv(x)
        lat = lat + self.attn(self.norm_q(lat), kv, kv, need_weights=False)[0]
        return lat + self.mlp(self.norm_mlp(lat))


def get_inputs():
    return [torch.randn(8, 2048, 64)]


def get_init_inputs():
    return []
