import torch
import torch.nn as nn


def conv_bn(cin, cout, k, stride=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class UniversalInvertedBottleneck(nn.Module):
    def __init__(self, cin, cout, start_k, mid_k, stride, expand, layer_scale=1e-5):
        super().__init__()
        self.start_dw = conv_bn(cin, cin, start_k, stride if not mid_k else 1, cin, act=False) if start_k else nn.Identity()
        mid = int(cin * expand)
        self.expand = conv_bn(cin, mid, 1)
        self.middle_dw = conv_bn(mid, mid, mid_k, stride, mid) if mid_k else nn.Identity()
        self.proj = conv_bn(mid, cout, 1, act=False)
        self.gamma = nn.Parameter(layer_scale * torch.ones(cout)) if layer_scale else None
        self.has_skip = stride == 1 and cin == cout

    def forward(self, x):
        shortcut = x
        x = self.proj(self.middle_dw(self.expand(self.start_dw(x))))
        if self.gamma is not None:
            x = x.mul_(self.gamma.view(1, -1, 1, 1))
        return x + shortcut if self.has_skip else x


class Model(nn.Module):
    """MobileNetV4 UIB blocks (timm, eval): the four UIB variants in a row - ExtraDW (dw3 -> 1x1 -> dw5 -> 1x1,
    stride 2), IB (1x1 -> dw3 -> 1x1), ConvNext-like (dw7 -> 1x1 -> 1x1) and FFN (1x1 -> 1x1), with layer scale
    applied by an in-place mul_ and residuals."""
    def __init__(self, c_in=64, c=96):
        super().__init__()
        self.blocks = nn.Sequential(
            UniversalInvertedBottleneck(c_in, c, 3, 5, 2, 4.0),
            UniversalInvertedBottleneck(c, c, 0, 3, 1, 4.0),
            UniversalInvertedBottleneck(c, c, 7, 0, 1, 4.0),
            UniversalInvertedBottleneck(c, c, 0, 0, 1, 2.0),
        )
        self.eval()

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(16, 64, 56, 56)]


def get_init_inputs():
    return [64, 96]
