import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """RWKV-6 (Finch) time mixing: token shift by nn.ZeroPad2d, data-dependent lerp (ddlerp) through a
    low-rank tanh LoRA producing 5 mixes at once (bmm over a stacked (5, r, C) weight, unbind), data-dependent
    decay w = exp(-exp(time_decay + lora)), per-head WKV recurrence as a Python loop over time with an outer-product
    state (B, H, K, K) and bonus u, GroupNorm over heads, SiLU gate."""
    def __init__(self, d=256, heads=4, r_mix=32, r_decay=64):
        super().__init__()
        self.h, self.k = heads, d // heads
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.time_maa_x = nn.Parameter(torch.rand(1, 1, d))
        self.time_maa = nn.Parameter(torch.rand(5, 1, 1, d))   # w k v r g
        self.time_maa_w1 = nn.Parameter(torch.randn(d, r_mix * 5) * 0.01)
        self.time_maa_w2 = nn.Parameter(torch.randn(5, r_mix, d) * 0.01)
        self.time_decay = nn.Parameter(torch.linspace(-6, -1, d).view(1, 1, d))
        self.time_decay_w1 = nn.Parameter(torch.randn(d, r_decay) * 0.01)
        self.time_decay_w2 = nn.Parameter(torch.randn(r_decay, d) * 0.01)
        self.time_faaaa = nn.Parameter(torch.rand(heads, d // heads) * 0.5)
        self.receptance = nn.Linear(d, d, bias=False)
        self.key = nn.Linear(d, d, bias=False)
        self.value = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, d, bias=False)
        self.output = nn.Linear(d, d, bias=False)
        self.ln_x = nn.GroupNorm(heads, d, eps=64e-5)

    def forward(self, x):
        B, T, C = x.shape
        H, K = self.h, self.k
        xx = self.time_shift(x) - x
        xxx = x + xx * self.time_maa_x
        xxx = torch.tanh(xxx @ self.time_maa_w1).view(B * T, 5, -1).transpose(0, 1)
        xxx = torch.bmm(xxx, self.time_maa_w2).view(5, B, T, -1)
        mw, mk, mv, mr, mg = (xxx + self.time_maa).unbind(dim=0)
        xw, xk, xv, xr, xg = x + xx * mw, x + xx * mk, x + xx * mv, x + xx * mr, x + xx * mg
        r = self.receptance(xr).view(B, T, H, K)
        k = self.key(xk).view(B, T, H, K)
        v = self.value(xv).view(B, T, H, K)
        g = F.silu(self.gate(xg))
        ww = self.time_decay + torch.tanh(xw @ self.time_decay_w1) @ self.time_decay_w2
        w = torch.exp(-torch.exp(ww.float())).view(B, T, H, K)
        u = self.time_faaaa
        state = torch.zeros(B, H, K, K, dtype=x.dtype, device=x.device)
        outs = []
        for t in range(T):
            kv = k[:, t, :, :, None] * v[:, t, :, None, :]
            y = (r[:, t, :, :, None] * (u[None, :, :, None] * kv + state)).sum(dim=2)
            state = w[:, t, :, :, None] * state + kv
            outs.append(y)
        y = torch.stack(outs, dim=1).reshape(B * T, C)
        y = self.ln_x(y).view(B, T, C)
        return self.output(y * g)


def get_inputs():
    return [torch.randn(4, 32, 256)]


def get_init_inputs():
    return [256, 4, 32, 64]
