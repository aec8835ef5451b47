import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Sparse Transformer-style fixed attention pattern built in forward: local band = tril(ones) & ~tril(ones, -window), strided columns via (j % stride == stride - 1) combined with tril, additive mask from masked_fill(~allowed, torch.finfo(dtype).min), softmax, dropout in eval."""
    def __init__(self, d=64, h=4, window=8, stride=8):
        super().__init__()
        self.h, self.window, self.stride = h, window, stride
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)
        self.eval()

    def forward(self, x):
        B, T, C = x.shape
        ones = torch.ones(T, T, dtype=torch.bool, device=x.device)
        local = torch.tril(ones) & ~torch.tril(ones, diagonal=-self.window)
        j = torch.arange(T, device=x.device)
        strided = torch.tril(ones) & ((j % self.stride) == (self.stride - 1)).unsqueeze(0)
        allowed = local | strided
        q, k, v = self.qkv(x).view(B, T, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / (C // self.h) ** 0.5
        att = att.masked_fill(~allowed, torch.finfo(att.dtype).min)
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)

def get_inputs():
    return [torch.randn(4, 64, 64)]

def get_init_inputs():
    return [64, 4, 8, 8]
