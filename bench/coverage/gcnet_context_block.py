"""GCNet global context block: attention pooling (1x1 conv to one map, softmax over H*W, matmul with the flattened features), bottleneck transform 1x1 conv -> LayerNorm([C/r,1,1]) -> ReLU -> 1x1 conv, added to every position."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c=128, ratio=0.25):
        super().__init__()
        p = int(c * ratio)
        self.mask = nn.Conv2d(c, 1, 1)
        self.softmax = nn.Softmax(dim=2)
        self.transform = nn.Sequential(nn.Conv2d(c, p, 1), nn.LayerNorm([p, 1, 1]), nn.ReLU(inplace=True), nn.Conv2d(p, c, 1))

    def forward(self, x):
        B, C, H, W = x.shape
        inp = x.view(B, C, H * W).unsqueeze(1)  # B,1,C,HW
        m = self.mask(x).view(B, 1, H * W)
        m = self.softmax(m).unsqueeze(-1)  # B,1,HW,1
        ctx = torch.matmul(inp, m).view(B, C, 1, 1)
        return x + self.transform(ctx)


def get_inputs():
    return [torch.randn(4, 128, 24, 24)]


def get_init_inputs():
    return []
