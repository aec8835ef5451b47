"""Reference: a plain matmul over rand() inputs (as KernelBench's level-1 matmuls draw them)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(128, 1024), torch.rand(1024, 128)]


def get_init_inputs():
    return []
