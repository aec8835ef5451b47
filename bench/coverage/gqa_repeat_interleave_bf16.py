import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Grouped-query attention (bf16): 8 query heads share 2 KV heads via repeat_interleave, causal SDPA."""
    def __init__(self, dim=512, n_heads=8, n_kv_heads=2):
        super().__init__()
        self.h, self.kvh, self.hd = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(n_heads * self.hd, dim, bias=False)
        self.to(torch.bfloat16)
    def forward(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.kvh, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.kvh, self.hd).transpose(1, 2)
        rep = self.h // self.kvh
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(B, T, -1))

def get_inputs():
    return [torch.randn(2, 256, 512, dtype=torch.bfloat16)]

def get_init_inputs():
    return [512, 8, 2]
