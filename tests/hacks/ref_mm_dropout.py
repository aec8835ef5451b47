"""Reference (red team round 14): dropout of a long-contraction matmul over rand() inputs (KernelBench level2 has
Matmul+Dropout+... modules). A module is built in training mode, so the dropout draws a mask each call."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, a, b):
        return self.drop(torch.matmul(a, b))


def get_inputs():
    return [torch.rand(32, 65536), torch.rand(65536, 32)]


def get_init_inputs():
    return [0.1]
