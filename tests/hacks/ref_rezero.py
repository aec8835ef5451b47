"""A ReZero residual block (x + alpha * F(x), alpha starting at zero), written for the hack suite."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.alpha = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return x + self.alpha * self.conv2(F.relu(self.conv1(x)))


def get_inputs():
    return [torch.randn(2, 16, 16, 16)]


def get_init_inputs():
    return [16]
