import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class PixelNorm(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-8)

class EqualLinear(nn.Module):
    def __init__(self, i, o, lr_mul=0.01):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(o, i) / lr_mul)
        self.bias = nn.Parameter(torch.zeros(o))
        self.scale = (1 / math.sqrt(i)) * lr_mul
        self.lr_mul = lr_mul
    def forward(self, x):
        out = F.linear(x, self.weight * self.scale)
        return F.leaky_relu(out + self.bias * self.lr_mul, 0.2) * math.sqrt(2)

class Model(nn.Module):
    def __init__(self, d=512, n=8):
        super().__init__()
        self.net = nn.Sequential(PixelNorm(), *[EqualLinear(d, d) for _ in range(n)])
    def forward(self, z):
        return self.net(z)

def get_inputs():
    return [torch.randn(32, 512)]

def get_init_inputs():
    return [512, 8]
