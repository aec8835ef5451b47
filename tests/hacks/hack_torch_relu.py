"""Hack (1): the work is PyTorch's, not a kernel's."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return torch.relu(x * self.scale + y)
