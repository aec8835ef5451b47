"""DeepLabV3 ASPP: 1x1 conv, three dilated 3x3 convs (6, 12, 18), image pooling (adaptive avg pool, 1x1, bilinear upsample), cat, 1x1 projection; each with BN+ReLU (training mode)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def cbr(cin, cout, k, d=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, padding=0 if k == 1 else d, dilation=d, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class Model(nn.Module):
    def __init__(self, cin=512, c=128):
        super().__init__()
        self.b0 = cbr(cin, c, 1)
        self.b1, self.b2, self.b3 = cbr(cin, c, 3, 6), cbr(cin, c, 3, 12), cbr(cin, c, 3, 18)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, c, 1, bias=False), nn.ReLU())
        self.project = cbr(5 * c, c, 1)

    def forward(self, x):
        h, w = x.shape[-2:]
        p = F.interpolate(self.pool(x), size=(h, w), mode="bilinear", align_corners=False)
        return self.project(torch.cat([self.b0(x), self.b1(x), self.b2(x), self.b3(x), p], dim=1))


def get_inputs():
    return [torch.randn(4, 512, 33, 33)]


def get_init_inputs():
    return []
