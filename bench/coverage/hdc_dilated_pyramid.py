"""Hybrid dilated convolution pyramid (deformable-free): parallel 3x3 branches with dilations 1, 2, 5 and a 2x2-avg-pooled branch upsampled back with bilinear interpolate (align_corners=False), each GroupNorm + SiLU, concatenated, fused by a 1x1 conv, residual."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c=64, b=32):
        super().__init__()
        self.branches = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(c, b, 3, padding=d, dilation=d, bias=False), nn.GroupNorm(8, b), nn.SiLU()) for d in (1, 2, 5)]
        )
        self.pool_branch = nn.Sequential(nn.Conv2d(c, b, 1, bias=False), nn.GroupNorm(8, b), nn.SiLU())
        self.fuse = nn.Conv2d(4 * b, c, 1)

    def forward(self, x):
        H, W = x.shape[-2:]
        outs = [br(x) for br in self.branches]
        p = self.pool_branch(F.avg_pool2d(x, 2))
        outs.append(F.interpolate(p, size=(H, W), mode="bilinear", align_corners=False))
        return x + self.fuse(torch.cat(outs, dim=1))


def get_inputs():
    return [torch.randn(2, 64, 32, 32)]


def get_init_inputs():
    return []
