import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Swin shifted-window attention: torch.roll by -shift, window partition, attention with a precomputed shift mask buffer (-100), merge, roll back, residual."""
    def __init__(self, dim=96, res=28, window=7, heads=3):
        super().__init__()
        self.ws, self.shift, self.h, self.res = window, window // 2, heads, res
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        img_mask = torch.zeros((1, res, res, 1))
        cnt = 0
        for hs in (slice(0, -window), slice(-window, -self.shift), slice(-self.shift, None)):
            for ws in (slice(0, -window), slice(-window, -self.shift), slice(-self.shift, None)):
                img_mask[:, hs, ws, :] = cnt; cnt += 1
        mw = self.partition(img_mask).squeeze(-1)
        am = mw.unsqueeze(1) - mw.unsqueeze(2)
        self.register_buffer("attn_mask", am.masked_fill(am != 0, -100.0).masked_fill(am == 0, 0.0))
    def partition(self, x):
        B, H, W, C = x.shape
        x = x.view(B, H // self.ws, self.ws, W // self.ws, self.ws, C)
        return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, self.ws * self.ws, C)
    def forward(self, x):
        B, L, C = x.shape
        H = W = self.res
        sc = x
        x = self.norm(x).view(B, H, W, C)
        x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        xw = self.partition(x)
        nW, N = self.attn_mask.shape[0], xw.shape[1]
        q, k, v = self.qkv(xw).reshape(-1, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        attn = (q * (C // self.h) ** -0.5) @ k.transpose(-2, -1)
        attn = attn.view(B, nW, self.h, N, N) + self.attn_mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.h, N, N).softmax(-1)
        xw = self.proj((attn @ v).transpose(1, 2).reshape(-1, N, C))
        x = xw.view(B, H // self.ws, W // self.ws, self.ws, self.ws, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
        x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        return sc + x.view(B, L, C)

def get_inputs():
    return [torch.randn(4, 28 * 28, 96)]

def get_init_inputs():
    return [96, 28, 7, 3]
