import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class LoRALinear(nn.Module):
    def __init__(self, fin, fout, r=8, alpha=16):
        super().__init__()
        self.base = nn.Linear(fin, fout)
        self.lora_A = nn.Parameter(torch.randn(r, fin) / math.sqrt(fin))
        self.lora_B = nn.Parameter(torch.randn(fout, r) * 0.01)
        self.scaling = alpha / r
    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling

class Model(nn.Module):
    """PEFT-style LoRA on q and v projections of an attention layer (F.linear base + low-rank path), SDPA, out projection."""
    def __init__(self, d=512, heads=8, r=8):
        super().__init__()
        self.h = heads
        self.q = LoRALinear(d, d, r); self.k = nn.Linear(d, d); self.v = LoRALinear(d, d, r)
        self.o = nn.Linear(d, d)
    def forward(self, x):
        B, T, C = x.shape
        sh = lambda t: t.view(B, T, self.h, C // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(sh(self.q(x)), sh(self.k(x)), sh(self.v(x)))
        return self.o(y.transpose(1, 2).reshape(B, T, C))

def get_inputs():
    return [torch.randn(4, 128, 512)]

def get_init_inputs():
    return [512, 8, 8]
