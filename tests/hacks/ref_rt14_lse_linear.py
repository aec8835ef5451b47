"""Reference (rt14): Linear -> logsumexp over the features (KernelBench level 2 has Gemm ... LogSumExp modules)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.logsumexp(self.fc(x), dim=1)


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return [512, 16384]
