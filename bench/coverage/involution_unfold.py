import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Involution (Li et al. 2021): per-pixel kernels generated from the input, applied with F.unfold."""
    def __init__(self, c=64, k=7, groups=4, r=4):
        super().__init__()
        self.k, self.g = k, groups
        self.reduce = nn.Sequential(nn.Conv2d(c, c // r, 1), nn.BatchNorm2d(c // r), nn.ReLU())
        self.span = nn.Conv2d(c // r, k * k * groups, 1)
        self.eval()
    def forward(self, x):
        B, C, H, W = x.shape
        w = self.span(self.reduce(x)).view(B, self.g, self.k * self.k, H, W).unsqueeze(2)
        u = F.unfold(x, self.k, padding=(self.k - 1) // 2).view(B, self.g, C // self.g, self.k * self.k, H, W)
        return (w * u).sum(dim=3).view(B, C, H, W)

def get_inputs():
    return [torch.randn(4, 64, 32, 32)]

def get_init_inputs():
    return [64, 7, 4, 4]
