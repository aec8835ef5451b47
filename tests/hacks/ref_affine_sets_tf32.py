"""Reference that switches TF32 on itself, inside forward: its own business, not a candidate's hack."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        torch.backends.cuda.matmul.allow_tf32 = True
        return torch.relu(x * self.scale + y)


def get_inputs():
    return [torch.randn(8, 33), torch.randn(8, 33)]


def get_init_inputs():
    return [2.5]
