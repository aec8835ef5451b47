import torch
import torch.nn as nn

class Model(nn.Module):
    """Talking-heads attention (CaiT/Shazeer): logits mixed across heads with a Linear over the head dim (permute to put heads last) before softmax, and again after softmax, then weighted values."""
    def __init__(self, dim=64, heads=8):
        super().__init__()
        self.h = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj_l = nn.Linear(heads, heads)
        self.proj_w = nn.Linear(heads, heads)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
        attn = q @ k.transpose(-2, -1)
        attn = self.proj_l(attn.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        attn = attn.softmax(dim=-1)
        attn = self.proj_w(attn.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)

def get_inputs():
    return [torch.randn(4, 50, 64)]

def get_init_inputs():
    return [64, 8]
