"""DeepSeek-V2/V3 multi-head latent attention (MLA): KV compressed to a latent by a down projection + RMSNorm, up-projected to per-head no-RoPE keys and values, a decoupled RoPE key shared across heads (expand), q = [q_nope, q_rope] concatenated, SDPA with is_causal and an explicit scale."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def rope(x, cos, sin):
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Model(nn.Module):
    def __init__(self, dim=256, heads=4, nope=32, rope_d=16, v_d=32, kv_rank=64, q_rank=96, T=64):
        super().__init__()
        self.h, self.nope, self.rd, self.vd = heads, nope, rope_d, v_d
        self.q_down = nn.Linear(dim, q_rank, bias=False)
        self.q_norm = nn.RMSNorm(q_rank, eps=1e-6)
        self.q_up = nn.Linear(q_rank, heads * (nope + rope_d), bias=False)
        self.kv_down = nn.Linear(dim, kv_rank + rope_d, bias=False)
        self.kv_norm = nn.RMSNorm(kv_rank, eps=1e-6)
        self.kv_up = nn.Linear(kv_rank, heads * (nope + v_d), bias=False)
        self.out = nn.Linear(heads * v_d, dim, bias=False)
        self.kv_rank = kv_rank
        inv = 1.0 / (10000 ** (torch.arange(0, rope_d, 2).float() / rope_d))
        f = torch.outer(torch.arange(T).float(), inv)
        self.register_buffer("cos", f.cos())
        self.register_buffer("sin", f.sin())

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_up(self.q_norm(self.q_down(x))).view(B, T, self.h, self.nope + self.rd).transpose(1, 2)
        q_nope, q_pe = q.split([self.nope, self.rd], dim=-1)
        ckv, k_pe = self.kv_down(x).split([self.kv_rank, self.rd], dim=-1)
        kv = self.kv_up(self.kv_norm(ckv)).view(B, T, self.h, self.nope + self.vd).transpose(1, 2)
        k_nope, v = kv.split([self.nope, self.vd], dim=-1)
        cos, sin = self.cos[:T], self.sin[:T]
        q_pe = rope(q_pe, cos, sin)
        k_pe = rope(k_pe.unsqueeze(1), cos, sin).expand(-1, self.h, -1, -1)
        qf = torch.cat([q_nope, q_pe], dim=-1)
        kf = torch.cat([k_nope, k_pe], dim=-1)
        o = F.scaled_dot_product_attention(qf, kf, v, is_causal=True, scale=(self.nope + self.rd) ** -0.5)
        return self.out(o.transpose(1, 2).reshape(B, T, -1))


def get_inputs():
    return [torch.randn(2, 64, 256)]


def get_init_inputs():
    return []
