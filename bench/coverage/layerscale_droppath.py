import torch
import torch.nn as nn

def drop_path(x, p=0., training=False):
    if p == 0. or not training:
        return x
    keep = 1 - p
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = x.new_empty(shape).bernoulli_(keep)
    return x * mask / keep

class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__(); self.p = p
    def forward(self, x):
        return drop_path(x, self.p, self.training)

class Model(nn.Module):
    """CaiT/DeiT-III block: pre-norm attention and MLP, each scaled by LayerScale gamma, DropPath."""
    def __init__(self, d=384, h=6, init=1e-5, dp=0.1):
        super().__init__()
        self.n1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.g1 = nn.Parameter(init * torch.ones(d))
        self.n2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.g2 = nn.Parameter(init * torch.ones(d))
        self.dp = DropPath(dp)
        self.eval()
    def forward(self, x):
        h = self.n1(x)
        x = x + self.dp(self.g1 * self.attn(h, h, h, need_weights=False)[0])
        x = x + self.dp(self.g2 * self.mlp(self.n2(x)))
        return x

def get_inputs():
    return [torch.randn(8, 197, 384)]

def get_init_inputs():
    return [384, 6, 1e-5, 0.1]
