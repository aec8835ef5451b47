"""Swin patch merging: (B, H*W, C) viewed as (B, H, W, C), four strided slices, cat to 4C, LayerNorm, Linear 4C -> 2C without bias."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, h=56, w=56, c=96):
        super().__init__()
        self.h, self.w = h, w
        self.norm = nn.LayerNorm(4 * c)
        self.reduction = nn.Linear(4 * c, 2 * c, bias=False)

    def forward(self, x):
        b, l, c = x.shape
        x = x.view(b, self.h, self.w, c)
        x0 = x[:, 0::2, 0::2, :]
        x1 = x[:, 1::2, 0::2, :]
        x2 = x[:, 0::2, 1::2, :]
        x3 = x[:, 1::2, 1::2, :]
        x = torch.cat([x0, x1, x2, x3], -1).view(b, -1, 4 * c)
        return self.reduction(self.norm(x))


def get_inputs():
    return [torch.randn(16, 56 * 56, 96)]


def get_init_inputs():
    return []
