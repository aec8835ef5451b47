"""Qwen3-style decoder block: RMSNorm, q/k RMSNorm per head (QK-norm), rotate_half RoPE from cos/sin buffers, GQA via repeat_interleave, explicit causal softmax attention, SwiGLU MLP."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self, dim=256, n_heads=8, n_kv=2, hidden=512, max_len=128, theta=10000.0):
        super().__init__()
        self.h, self.kv, self.hd = n_heads, n_kv, dim // n_heads
        self.q_proj = nn.Linear(dim, n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(dim, n_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(dim, n_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(n_heads * self.hd, dim, bias=False)
        self.q_norm = RMSNorm(self.hd)
        self.k_norm = RMSNorm(self.hd)
        self.in_norm = RMSNorm(dim)
        self.post_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        inv = 1.0 / (theta ** (torch.arange(0, self.hd, 2).float() / self.hd))
        t = torch.arange(max_len).float()
        freqs = torch.outer(t, inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        h = self.in_norm(x)
        q = self.q_norm(self.q_proj(h).view(B, T, self.h, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(h).view(B, T, self.kv, self.hd)).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.kv, self.hd).transpose(1, 2)
        cos, sin = self.cos[:T][None, None], self.sin[:T][None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / (self.hd ** 0.5)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.o_proj(o)
        h = self.post_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def get_inputs():
    return [torch.randn(2, 64, 256)]


def get_init_inputs():
    return []
