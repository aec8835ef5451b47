import torch
import torch.nn as nn
import torch.nn.functional as F

class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))
    def forward(self, x):
        return x + self.body(x)

class Model(nn.Module):
    def __init__(self, c=64, depth=2):
        super().__init__()
        self.depth = depth
        self.up1 = nn.ModuleList([Residual(c) for _ in range(depth)])
        self.low = nn.ModuleList([Residual(c) for _ in range(depth)])
        self.mid = Residual(c)
        self.eval()
    def forward(self, x):
        skips = []
        for i in range(self.depth):
            skips.append(self.up1[i](x))
            x = self.low[i](F.max_pool2d(x, 2))
        x = self.mid(x)
        for i in reversed(range(self.depth)):
            x = F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False) + skips[i]
        return x

def get_inputs():
    return [torch.randn(4, 64, 64, 64)]

def get_init_inputs():
    return [64, 2]
