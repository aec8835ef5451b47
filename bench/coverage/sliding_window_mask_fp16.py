import math
import torch
import torch.nn as nn

class Model(nn.Module):
    """Mistral-style sliding-window causal attention written out (fp16): mask = triu(ones, -window) & tril(ones), masked_fill with finfo.min, softmax in fp32, cast back."""
    def __init__(self, dim=256, heads=4, window=64):
        super().__init__()
        self.h, self.hd, self.window = heads, dim // heads, window
        self.q = nn.Linear(dim, dim, bias=False); self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False); self.o = nn.Linear(dim, dim, bias=False)
        self.half()
    def forward(self, x):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, self.h, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, self.hd).transpose(1, 2)
        ones = torch.ones(T, T, dtype=torch.bool, device=x.device)
        allowed = torch.tril(ones) & torch.triu(ones, diagonal=-self.window)
        scores = q @ k.transpose(2, 3) / math.sqrt(self.hd)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        p = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o((p @ v).transpose(1, 2).reshape(B, T, C))

def get_inputs():
    return [torch.randn(2, 512, 256).half()]

def get_init_inputs():
    return [256, 4, 64]
