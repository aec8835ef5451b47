import math
import torch
import torch.nn as nn
import torch.nn.functional as F

def get_slopes(n):
    start = 2 ** (-2 ** -(math.log2(n) - 3))
    return [start * start ** i for i in range(n)]

class Model(nn.Module):
    def __init__(self, d=256, h=8, max_len=128):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        slopes = torch.tensor(get_slopes(h))
        pos = torch.arange(max_len)
        rel = pos[None, :] - pos[:, None]          # j - i
        bias = slopes[:, None, None] * rel[None].float()
        causal = torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1)
        bias = bias.masked_fill(causal, float('-inf'))
        self.register_buffer('alibi', bias)
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.h, -1).transpose(1, 2)
        k = k.view(B, T, self.h, -1).transpose(1, 2)
        v = v.view(B, T, self.h, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = att + self.alibi[:, :T, :T]
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)

def get_inputs():
    return [torch.randn(8, 128, 256)]

def get_init_inputs():
    return [256, 8, 128]
