"""Stable Diffusion SpatialTransformer: GroupNorm(32, eps=1e-6), proj_in 1x1 conv, tokens via rearrange (permute/reshape), self-attention, cross-attention to text context (B, 77, 128) with to_k/to_v from context, GEGLU feed-forward (chunk + gelu), proj_out 1x1 conv, residual to the image features."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, q_dim, ctx_dim, heads, dh):
        super().__init__()
        self.h, self.scale = heads, dh ** -0.5
        inner = heads * dh
        self.to_q = nn.Linear(q_dim, inner, bias=False)
        self.to_k = nn.Linear(ctx_dim, inner, bias=False)
        self.to_v = nn.Linear(ctx_dim, inner, bias=False)
        self.to_out = nn.Linear(inner, q_dim)

    def forward(self, x, ctx=None):
        ctx = x if ctx is None else ctx
        B, N, _ = x.shape
        q, k, v = self.to_q(x), self.to_k(ctx), self.to_v(ctx)
        q, k, v = (t.view(B, -1, self.h, t.shape[-1] // self.h).transpose(1, 2) for t in (q, k, v))
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale
        out = torch.einsum("bhij,bhjd->bhid", sim.softmax(dim=-1), v)
        return self.to_out(out.transpose(1, 2).reshape(B, N, -1))


class Model(nn.Module):
    def __init__(self, c=128, ctx_dim=128, heads=4):
        super().__init__()
        self.norm = nn.GroupNorm(32, c, eps=1e-6)
        self.proj_in = nn.Conv2d(c, c, 1)
        self.n1, self.n2, self.n3 = nn.LayerNorm(c), nn.LayerNorm(c), nn.LayerNorm(c)
        self.attn1 = Attn(c, c, heads, c // heads)
        self.attn2 = Attn(c, ctx_dim, heads, c // heads)
        self.ff_in = nn.Linear(c, 8 * c)
        self.ff_out = nn.Linear(4 * c, c)
        self.proj_out = nn.Conv2d(c, c, 1)

    def forward(self, x, context):
        B, C, H, W = x.shape
        h = self.proj_in(self.norm(x))
        h = h.permute(0, 2, 3, 1).reshape(B, H * W, C)
        h = h + self.attn1(self.n1(h))
        h = h + self.attn2(self.n2(h), context)
        a, g = self.ff_in(self.n3(h)).chunk(2, dim=-1)
        h = h + self.ff_out(a * F.gelu(g))
        h = h.reshape(B, H, W, C).permute(0, 3, 1, 2)
        return x + self.proj_out(h)


def get_inputs():
    return [torch.randn(2, 128, 16, 16), torch.randn(2, 77, 128)]


def get_init_inputs():
    return []
