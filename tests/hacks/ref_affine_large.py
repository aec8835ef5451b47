"""Reference: ref_affine's computation on inputs large enough (2 x 64 MiB) that a kernel of it runs
for tens of microseconds: work whose place on the timeline can be told from the marker's."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return torch.relu(x * self.scale + y)


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return [2.5]
