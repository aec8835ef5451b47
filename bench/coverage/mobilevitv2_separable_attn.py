"""MobileViT-v2 separable self-attention: patches unfolded with F.unfold-free reshape, 1x1 conv to [1 + 2d] channels split into query scores / key / value, softmax of the scores over patches, context vector = sum(key * scores), relu(value) * context broadcast, 1x1 out projection, fold back with reshape/permute; GroupNorm(1) pre-norm and a dwconv local rep."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c=64, d=64, ph=2, pw=2):
        super().__init__()
        self.ph, self.pw, self.d = ph, pw, d
        self.local = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), nn.BatchNorm2d(c), nn.SiLU(),
                                   nn.Conv2d(c, d, 1, bias=False))
        self.norm = nn.GroupNorm(1, d)
        self.qkv = nn.Conv2d(d, 1 + 2 * d, 1)
        self.out = nn.Conv2d(d, d, 1)
        self.proj = nn.Sequential(nn.Conv2d(d, c, 1, bias=False), nn.BatchNorm2d(c))
        self.eval()

    def forward(self, x):
        B, C, H, W = x.shape
        y = self.local(x)
        # unfold into (B, d, P, N) with P pixels per patch and N patches
        P, nh, nw = self.ph * self.pw, H // self.ph, W // self.pw
        p = y.reshape(B, self.d, nh, self.ph, nw, self.pw).permute(0, 1, 3, 5, 2, 4).reshape(B, self.d, P, nh * nw)
        qkv = self.qkv(self.norm(p))
        q, k, v = torch.split(qkv, [1, self.d, self.d], dim=1)
        scores = F.softmax(q, dim=-1)
        ctx = (k * scores).sum(dim=-1, keepdim=True)
        a = self.out(F.relu(v) * ctx.expand_as(v))
        p = p + a
        y = p.reshape(B, self.d, self.ph, self.pw, nh, nw).permute(0, 1, 4, 2, 5, 3).reshape(B, self.d, H, W)
        return x + self.proj(y)


def get_inputs():
    return [torch.randn(2, 64, 16, 16)]


def get_init_inputs():
    return []
