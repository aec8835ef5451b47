"""GhostNet bottleneck (eval): ghost module = primary 1x1 conv + BN + ReLU, cheap depthwise 3x3 on its output, torch.cat and slice to the wanted channels; SE with hard-sigmoid computed as relu6(x+3)/6; second ghost module without activation, residual."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Ghost(nn.Module):
    def __init__(self, cin, cout, relu=True):
        super().__init__()
        self.cout = cout
        init = (cout + 1) // 2
        self.primary = nn.Sequential(nn.Conv2d(cin, init, 1, bias=False), nn.BatchNorm2d(init),
                                     nn.ReLU(inplace=True) if relu else nn.Identity())
        self.cheap = nn.Sequential(nn.Conv2d(init, init, 3, 1, 1, groups=init, bias=False), nn.BatchNorm2d(init),
                                   nn.ReLU(inplace=True) if relu else nn.Identity())

    def forward(self, x):
        a = self.primary(x)
        b = self.cheap(a)
        return torch.cat([a, b], dim=1)[:, : self.cout]


class Model(nn.Module):
    def __init__(self, c=40, mid=120):
        super().__init__()
        self.g1 = Ghost(c, mid)
        self.se_reduce = nn.Conv2d(mid, mid // 4, 1)
        self.se_expand = nn.Conv2d(mid // 4, mid, 1)
        self.g2 = Ghost(mid, c, relu=False)
        self.eval()

    def forward(self, x):
        y = self.g1(x)
        s = F.adaptive_avg_pool2d(y, 1)
        s = self.se_expand(F.relu(self.se_reduce(s)))
        y = y * (F.relu6(s + 3.0) / 6.0)
        return x + self.g2(y)


def get_inputs():
    return [torch.randn(4, 40, 28, 28)]


def get_init_inputs():
    return []
