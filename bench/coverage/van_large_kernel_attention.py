"""VAN large kernel attention (LKA): depthwise 5x5, depthwise 7x7 with dilation 3 (padding 9), pointwise 1x1, result multiplied into the input; wrapped with 1x1 proj, GELU, and BN + layer scale as in the VAN block (eval)."""
import torch
import torch.nn as nn


class LKA(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv0 = nn.Conv2d(c, c, 5, padding=2, groups=c)
        self.conv_spatial = nn.Conv2d(c, c, 7, stride=1, padding=9, groups=c, dilation=3)
        self.conv1 = nn.Conv2d(c, c, 1)

    def forward(self, x):
        return x * self.conv1(self.conv_spatial(self.conv0(x)))


class Model(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.norm = nn.BatchNorm2d(c)
        self.proj1 = nn.Conv2d(c, c, 1)
        self.act = nn.GELU()
        self.lka = LKA(c)
        self.proj2 = nn.Conv2d(c, c, 1)
        self.layer_scale = nn.Parameter(1e-2 * torch.ones(c))
        self.eval()

    def forward(self, x):
        y = self.proj2(self.lka(self.act(self.proj1(self.norm(x)))))
        return x + self.layer_scale.unsqueeze(-1).unsqueeze(-1) * y


def get_inputs():
    return [torch.randn(2, 64, 28, 28)]


def get_init_inputs():
    return []
