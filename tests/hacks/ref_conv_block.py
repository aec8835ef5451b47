"""Reference (GPU tests): a convolution with bias, a ReLU and a per-channel shift (the built-in
coder's candidate for it calls cuDNN and keeps the result channels-last)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3)
        self.shift = nn.Parameter(torch.randn(16, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.shift


def get_inputs():
    return [torch.randn(16, 8, 34, 34)]


def get_init_inputs():
    return []
