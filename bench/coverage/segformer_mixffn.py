"""SegFormer Mix-FFN: Linear, tokens reshaped to an image via transpose(1,2).view(B,C,H,W) (reference code), depthwise 3x3 conv, flatten back, GELU, Linear, residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=128, hidden=512, h=32, w=32):
        super().__init__()
        self.h, self.w = h, w
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.dw = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        b, n, _ = x.shape
        y = self.fc1(self.norm(x))
        c = y.shape[-1]
        y = self.dw(y.transpose(1, 2).view(b, c, self.h, self.w)).flatten(2).transpose(1, 2)
        return x + self.fc2(self.act(y))


def get_inputs():
    return [torch.randn(16, 32 * 32, 128)]


def get_init_inputs():
    return []
