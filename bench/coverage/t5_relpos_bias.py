import math
import torch
import torch.nn as nn

class Model(nn.Module):
    """T5 attention with relative position bias computed in forward (bucketing on int64)."""
    def __init__(self, d=256, h=8, num_buckets=32, max_distance=128):
        super().__init__()
        self.h, self.nb, self.md = h, num_buckets, max_distance
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.rel_bias = nn.Embedding(num_buckets, h)

    def bucket(self, rel):
        nb = self.nb // 2
        ret = (rel > 0).to(torch.long) * nb
        n = torch.abs(rel)
        max_exact = nb // 2
        is_small = n < max_exact
        val_large = max_exact + (
            torch.log(n.float() / max_exact) / math.log(self.md / max_exact) * (nb - max_exact)
        ).to(torch.long)
        val_large = torch.min(val_large, torch.full_like(val_large, nb - 1))
        return ret + torch.where(is_small, n, val_large)

    def forward(self, x):
        B, T, C = x.shape
        ctx = torch.arange(T, dtype=torch.long, device=x.device)[:, None]
        mem = torch.arange(T, dtype=torch.long, device=x.device)[None, :]
        buckets = self.bucket(mem - ctx)
        bias = self.rel_bias(buckets).permute(2, 0, 1).unsqueeze(0)  # 1,h,T,T
        q = self.q(x).view(B, T, self.h, -1).transpose(1, 2)
        k = self.k(x).view(B, T, self.h, -1).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, -1).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) + bias
        w = scores.float().softmax(-1).type_as(scores)
        y = (w @ v).transpose(1, 2).reshape(B, T, C)
        return self.o(y)

def get_inputs():
    return [torch.randn(8, 128, 256)]

def get_init_inputs():
    return [256, 8, 32, 128]
