import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.trunc(x)


def get_inputs():
    return [torch.randn(64, 64) * 10]


def get_init_inputs():
    return []
