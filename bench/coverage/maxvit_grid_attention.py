import torch
import torch.nn as nn
import torch.nn.functional as F

def grid_partition(x, g):
    B, H, W, C = x.shape
    x = x.view(B, g, H // g, g, W // g, C)
    return x.permute(0, 2, 4, 1, 3, 5).contiguous().view(-1, g * g, C)

def grid_reverse(x, g, H, W):
    C = x.shape[-1]
    x = x.view(-1, H // g, W // g, g, g, C)
    return x.permute(0, 3, 1, 4, 2, 5).contiguous().view(-1, H, W, C)

class Model(nn.Module):
    """MaxViT grid attention (channels-last): LayerNorm, grid partition, MHSA via SDPA, reverse, residual."""
    def __init__(self, dim=64, heads=2, grid=7):
        super().__init__()
        self.g, self.h = grid, heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
    def forward(self, x):
        B, H, W, C = x.shape
        y = grid_partition(self.norm(x), self.g)
        N = y.shape[1]
        q, k, v = self.qkv(y).view(-1, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        y = self.proj(y.transpose(1, 2).reshape(-1, N, C))
        return x + grid_reverse(y, self.g, H, W)

def get_inputs():
    return [torch.randn(2, 28, 28, 64)]

def get_init_inputs():
    return [64, 2, 7]
