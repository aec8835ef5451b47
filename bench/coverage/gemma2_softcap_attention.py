"""Gemma 2 attention + LM head: attention logits soft-capped with cap*tanh(x/cap) before the causal mask, query scaled by query_pre_attn_scalar**-0.5, GeGLU (tanh GELU) MLP, sandwich RMSNorms with (1 + weight), final logit soft-capping."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GemmaRMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        out = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return out * (1.0 + self.weight.float())


class Model(nn.Module):
    def __init__(self, dim=256, heads=4, hidden=512, vocab=1000, attn_cap=50.0, final_cap=30.0):
        super().__init__()
        self.h, self.hd = heads, dim // heads
        self.attn_cap, self.final_cap = attn_cap, final_cap
        self.scaling = 64 ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.n1, self.n2, self.n3, self.n4, self.nf = (GemmaRMSNorm(dim) for _ in range(5))
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        x = x * (C ** 0.5)
        h = self.n1(x)
        q, k, v = self.qkv(h).view(B, T, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        s = torch.matmul(q * self.scaling, k.transpose(-1, -2))
        s = torch.tanh(s / self.attn_cap) * self.attn_cap
        causal = torch.tril(torch.ones(T, T, device=x.device)).bool()
        s = torch.where(causal, s, torch.finfo(s.dtype).min)
        p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        a = (p @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.n2(self.o(a))
        h = self.n3(x)
        x = x + self.n4(self.down(F.gelu(self.gate(h), approximate="tanh") * self.up(h)))
        logits = self.lm_head(self.nf(x))
        return torch.tanh(logits / self.final_cap) * self.final_cap


def get_inputs():
    return [torch.randn(2, 64, 256) * 0.1]


def get_init_inputs():
    return []
