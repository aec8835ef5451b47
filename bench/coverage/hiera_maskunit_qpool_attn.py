import torch
import torch.nn as nn
import torch.nn.functional as F


class MaskUnitAttention(nn.Module):
    """Hiera's MaskUnitAttention: tokens are in 'unrolled' order, so a q-stride pooling is a view to
    (B, heads, q_stride, -1, hd) and a .max(dim=2); windowed attention over mask units via a reshape that
    puts num_windows before the tokens; SDPA; dim_out > dim (stage transition)."""
    def __init__(self, dim, dim_out, heads, q_stride, window_size, use_mask_unit_attn):
        super().__init__()
        self.heads, self.q_stride, self.dim_out = heads, q_stride, dim_out
        self.head_dim = dim_out // heads
        self.qkv = nn.Linear(dim, 3 * dim_out)
        self.proj = nn.Linear(dim_out, dim_out)
        self.window_size, self.use_mask_unit_attn = window_size, use_mask_unit_attn

    def forward(self, x):
        B, N, _ = x.shape
        num_windows = (N // (self.q_stride * self.window_size)) if self.use_mask_unit_attn else 1
        qkv = self.qkv(x).reshape(B, -1, num_windows, 3, self.heads, self.head_dim).permute(3, 0, 4, 2, 1, 5)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.q_stride > 1:
            q = q.view(B, self.heads, num_windows, self.q_stride, -1, self.head_dim).max(dim=3).values
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.transpose(1, 3).reshape(B, -1, self.dim_out)
        return self.proj(x)


class Model(nn.Module):
    """Hiera stage-transition block (fp16): LayerNorm, projection shortcut pooled by the same unrolled
    max over q_stride (view + amax), MaskUnitAttention with q pooling, then an MLP block."""
    def __init__(self, dim=96, dim_out=192, heads=2, q_stride=4, window_size=16):
        super().__init__()
        self.q_stride = q_stride
        self.norm1 = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim_out)
        self.attn = MaskUnitAttention(dim, dim_out, heads, q_stride, window_size, True)
        self.norm2 = nn.LayerNorm(dim_out)
        self.mlp = nn.Sequential(nn.Linear(dim_out, 4 * dim_out), nn.GELU(), nn.Linear(4 * dim_out, dim_out))
        self.half()

    def forward(self, x):
        x_norm = self.norm1(x)
        B, N, _ = x.shape
        shortcut = self.proj(x_norm)
        shortcut = shortcut.view(B, self.q_stride, -1, shortcut.shape[-1]).amax(dim=1)
        x = shortcut + self.attn(x_norm)
        return x + self.mlp(self.norm2(x))


def get_inputs():
    return [torch.randn(16, 1024, 96).half()]


def get_init_inputs():
    return [96, 192, 2, 4, 16]
