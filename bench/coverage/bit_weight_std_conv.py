import torch
import torch.nn as nn
import torch.nn.functional as F

class StdConv2d(nn.Conv2d):
    def forward(self, x):
        w = self.weight
        v, m = torch.var_mean(w, dim=[1, 2, 3], keepdim=True, unbiased=False)
        w = (w - m) / torch.sqrt(v + 1e-10)
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)

class Model(nn.Module):
    """BiT pre-activation bottleneck: GroupNorm(32)+ReLU then weight-standardised convs (var_mean on the weight in forward), strided projection shortcut."""
    def __init__(self, cin=256, cmid=128, cout=512, stride=2):
        super().__init__()
        self.gn1 = nn.GroupNorm(32, cin); self.conv1 = StdConv2d(cin, cmid, 1, bias=False)
        self.gn2 = nn.GroupNorm(32, cmid); self.conv2 = StdConv2d(cmid, cmid, 3, stride=stride, padding=1, bias=False)
        self.gn3 = nn.GroupNorm(32, cmid); self.conv3 = StdConv2d(cmid, cout, 1, bias=False)
        self.downsample = StdConv2d(cin, cout, 1, stride=stride, bias=False)
    def forward(self, x):
        out = F.relu(self.gn1(x))
        residual = self.downsample(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.gn2(out)))
        out = self.conv3(F.relu(self.gn3(out)))
        return out + residual

def get_inputs():
    return [torch.randn(4, 256, 28, 28)]

def get_init_inputs():
    return [256, 128, 512, 2]
