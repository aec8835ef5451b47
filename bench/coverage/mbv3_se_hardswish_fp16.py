import torch
import torch.nn as nn
import torch.nn.functional as F

def make_divisible(v, d=8):
    return max(d, int(v + d / 2) // d * d)

class SqueezeExcite(nn.Module):
    def __init__(self, c, rd_ratio=0.25):
        super().__init__()
        rd = make_divisible(c * rd_ratio)
        self.conv_reduce = nn.Conv2d(c, rd, 1)
        self.conv_expand = nn.Conv2d(rd, c, 1)
    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        s = self.conv_expand(F.relu(self.conv_reduce(s)))
        return x * F.hardsigmoid(s)

class Model(nn.Module):
    """MobileNetV3 inverted residual (eval, fp16): 1x1 expand, BN, hardswish, dw 5x5, BN, hardswish, SE(hardsigmoid), 1x1, BN, residual."""
    def __init__(self, c=40, exp=120):
        super().__init__()
        self.conv_pw = nn.Conv2d(c, exp, 1, bias=False); self.bn1 = nn.BatchNorm2d(exp)
        self.conv_dw = nn.Conv2d(exp, exp, 5, padding=2, groups=exp, bias=False); self.bn2 = nn.BatchNorm2d(exp)
        self.se = SqueezeExcite(exp)
        self.conv_pwl = nn.Conv2d(exp, c, 1, bias=False); self.bn3 = nn.BatchNorm2d(c)
        self.eval(); self.half()
    def forward(self, x):
        shortcut = x
        x = F.hardswish(self.bn1(self.conv_pw(x)))
        x = F.hardswish(self.bn2(self.conv_dw(x)))
        x = self.se(x)
        x = self.bn3(self.conv_pwl(x))
        return x + shortcut

def get_inputs():
    return [torch.randn(8, 40, 28, 28).half()]

def get_init_inputs():
    return [40, 120]
