import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Differential Transformer attention: two softmax maps subtracted with lambda = exp(lq1.lk1) - exp(lq2.lk2) + lambda_init, per-head RMSNorm (F.rms_norm), scaled by (1 - lambda_init)."""
    def __init__(self, d=256, heads=4, depth=1):
        super().__init__()
        self.h = heads
        self.hd = d // heads // 2
        self.q = nn.Linear(d, d, bias=False); self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False); self.o = nn.Linear(d, d, bias=False)
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * depth)
        self.lq1 = nn.Parameter(torch.randn(self.hd) * 0.1); self.lk1 = nn.Parameter(torch.randn(self.hd) * 0.1)
        self.lq2 = nn.Parameter(torch.randn(self.hd) * 0.1); self.lk2 = nn.Parameter(torch.randn(self.hd) * 0.1)
        self.norm_w = nn.Parameter(torch.ones(2 * self.hd))
    def forward(self, x):
        B, T, C = x.shape
        q = self.q(x).view(B, T, 2 * self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, 2 * self.h, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, 2 * self.hd).transpose(1, 2)
        w = torch.matmul(q * self.hd ** -0.5, k.transpose(-1, -2))
        causal = torch.triu(torch.full((T, T), float("-inf"), device=x.device), 1)
        w = torch.softmax(w + causal, dim=-1, dtype=torch.float32).type_as(w)
        lam = torch.exp(torch.sum(self.lq1 * self.lk1, dim=-1).float()) - torch.exp(torch.sum(self.lq2 * self.lk2, dim=-1).float()) + self.lambda_init
        w = w.view(B, self.h, 2, T, T)
        w = w[:, :, 0] - lam * w[:, :, 1]
        a = torch.matmul(w, v)
        a = F.rms_norm(a, (2 * self.hd,), self.norm_w, eps=1e-5) * (1 - self.lambda_init)
        return self.o(a.transpose(1, 2).reshape(B, T, C))

def get_inputs():
    return [torch.randn(4, 128, 256)]

def get_init_inputs():
    return [256, 4, 1]
