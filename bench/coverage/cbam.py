"""CBAM: channel attention (avg and max pool through a shared MLP, sigmoid) then spatial attention (mean and max over channels, cat, 7x7 conv, sigmoid)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c=128, r=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv2d(c, c // r, 1, bias=False), nn.ReLU(), nn.Conv2d(c // r, c, 1, bias=False))
        self.spatial = nn.Conv2d(2, 1, 7, padding=3, bias=False)

    def forward(self, x):
        ca = torch.sigmoid(self.mlp(torch.mean(x, (2, 3), keepdim=True)) + self.mlp(torch.amax(x, (2, 3), keepdim=True)))
        x = x * ca
        avg = torch.mean(x, dim=1, keepdim=True)
        mx, _ = torch.max(x, dim=1, keepdim=True)
        sa = torch.sigmoid(self.spatial(torch.cat([avg, mx], dim=1)))
        return x * sa


def get_inputs():
    return [torch.randn(16, 128, 32, 32)]


def get_init_inputs():
    return []
