"""EfficientViT (MIT Han lab) lightweight multi-scale linear attention: 1x1 qkv conv, multi-scale tokens from a depthwise 5x5 + grouped 1x1 conv aggregation, ReLU kernel linear attention computed with matmuls and a padded ones column for the normaliser (F.pad value=1), eps division, 1x1 projection + BN."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c=64, dim=16, eps=1e-15):
        super().__init__()
        self.dim, self.eps = dim, eps
        heads = c // dim
        self.qkv = nn.Conv2d(c, 3 * heads * dim, 1, bias=False)
        self.agg_dw = nn.Conv2d(3 * heads * dim, 3 * heads * dim, 5, padding=2, groups=3 * heads * dim, bias=False)
        self.agg_pw = nn.Conv2d(3 * heads * dim, 3 * heads * dim, 1, groups=3 * heads, bias=False)
        self.proj = nn.Conv2d(2 * heads * dim, c, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.eval()

    def forward(self, x):
        B, _, H, W = x.shape
        qkv = self.qkv(x)
        ms = torch.cat([qkv, self.agg_pw(self.agg_dw(qkv))], dim=1)
        ms = ms.reshape(B, -1, 3 * self.dim, H * W).transpose(-1, -2)  # B, heads', N, 3d
        q, k, v = ms[..., : self.dim], ms[..., self.dim : 2 * self.dim], ms[..., 2 * self.dim :]
        q, k = F.relu(q), F.relu(k)
        v = F.pad(v, (0, 1), mode="constant", value=1.0)
        kv = torch.matmul(k.transpose(-1, -2), v)
        out = torch.matmul(q, kv)
        out = out[..., :-1] / (out[..., -1:] + self.eps)
        out = out.transpose(-1, -2).reshape(B, -1, H, W)
        return x + self.bn(self.proj(out))


def get_inputs():
    return [torch.randn(2, 64, 16, 16)]


def get_init_inputs():
    return []
