"""ECA-Net channel attention: global average pool, 1-d conv across channels (squeeze/transpose), sigmoid gate."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c=256, k=5):
        super().__init__()
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.conv = nn.Conv1d(1, 1, k, padding=(k - 1) // 2, bias=False)

    def forward(self, x):
        y = self.avg(x)
        y = self.conv(y.squeeze(-1).transpose(-1, -2)).transpose(-1, -2).unsqueeze(-1)
        return x * y.sigmoid().expand_as(x)


def get_inputs():
    return [torch.randn(16, 256, 28, 28)]


def get_init_inputs():
    return []
