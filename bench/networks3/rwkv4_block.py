"""RWKV-4 block (BlinkDL/RWKV-LM, RWKV-v4neo/src/model.py): token shift by nn.ZeroPad2d, time-mix
with the WKV recurrence written as its CUDA kernel's loop over time (running max for stability),
sigmoid receptance; channel-mix with squared ReLU; pre-LayerNorm residuals."""
import math

import torch
import torch.nn as nn


def wkv(w, u, k, v):
    # wkv_cuda.cu's forward, vectorised over (batch, channel); w = -exp(time_decay)
    B, T, C = k.shape
    p = torch.zeros(B, C, dtype=k.dtype, device=k.device)
    q = torch.zeros(B, C, dtype=k.dtype, device=k.device)
    o = torch.full((B, C), -1e38, dtype=k.dtype, device=k.device)
    ys = []
    for t in range(T):
        kk, vv = k[:, t], v[:, t]
        no = torch.maximum(o, u + kk)
        A = torch.exp(o - no)
        Bt = torch.exp(u + kk - no)
        ys.append((A * p + Bt * vv) / (A * q + Bt))
        no = torch.maximum(w + o, kk)
        A = torch.exp(w + o - no)
        Bt = torch.exp(kk - no)
        p = A * p + Bt * vv
        q = A * q + Bt
        o = no
    return torch.stack(ys, dim=1)


class RWKV_TimeMix(nn.Module):
    def __init__(self, n_embd, layer_id, n_layer):
        super().__init__()
        ratio_0_to_1 = layer_id / (n_layer - 1)
        ratio_1_to_almost0 = 1.0 - layer_id / n_layer
        ddd = (torch.arange(n_embd) / n_embd).view(1, 1, n_embd)
        h = torch.arange(n_embd)
        self.time_decay = nn.Parameter(-5 + 8 * (h / (n_embd - 1)) ** (0.7 + 1.3 * ratio_0_to_1))
        zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(n_embd)]) * 0.5
        self.time_first = nn.Parameter(torch.ones(n_embd) * math.log(0.3) + zigzag)
        self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
        self.time_mix_v = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
        self.time_mix_r = nn.Parameter(torch.pow(ddd, 0.5 * ratio_1_to_almost0))
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.output = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k, v, r = self.key(xk), self.value(xv), self.receptance(xr)
        sr = torch.sigmoid(r)
        rwkv = sr * wkv(-torch.exp(self.time_decay), self.time_first, k, v)
        return self.output(rwkv)


class RWKV_ChannelMix(nn.Module):
    def __init__(self, n_embd, layer_id, n_layer):
        super().__init__()
        ratio_1_to_almost0 = 1.0 - layer_id / n_layer
        ddd = (torch.arange(n_embd) / n_embd).view(1, 1, n_embd)
        self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
        self.time_mix_r = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.key = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = torch.square(torch.relu(self.key(xk)))
        kv = self.value(k)
        return torch.sigmoid(self.receptance(xr)) * kv


class Model(nn.Module):
    def __init__(self, n_embd=768, layer_id=6, n_layer=12):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.att = RWKV_TimeMix(n_embd, layer_id, n_layer)
        self.ffn = RWKV_ChannelMix(n_embd, layer_id, n_layer)

    def forward(self, x):
        x = x + self.att(self.ln1(x))
        return x + self.ffn(self.ln2(x))


batch_size = 16
seq_len = 32  # the loop is unrolled per token: kept short
n_embd = 768  # RWKV-4-Pile-169M


def get_inputs():
    return [torch.randn(batch_size, seq_len, n_embd)]


def get_init_inputs():
    return [n_embd, 6, 12]
