import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d=256, h=8):
        super().__init__()
        self.h = h
        self.to_qkv = nn.Linear(d, 3 * d, bias=False)
        self.to_out = nn.Linear(d, d)
        self.scale = (d // h) ** -0.5
    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.h, -1).permute(0, 2, 1, 3) for t in (q, k, v))
        dots = torch.einsum('bhqd,bhkd->bhqk', q, k) * self.scale
        attn = dots.softmax(dim=-1)
        out = torch.einsum('bhqk,bhkd->bhqd', attn, v)
        out = out.permute(0, 2, 1, 3).reshape(b, n, -1)
        return self.to_out(out)

def get_inputs():
    return [torch.randn(8, 196, 256)]

def get_init_inputs():
    return [256, 8]
