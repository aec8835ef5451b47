"""Reference: a hypernetwork-style layer whose weight is generated from two parameters every call,
y = x @ tanh(W1 @ W2) + b (nothing reassociates through the tanh), written for the hack suite."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n, n) / n**0.5)
        self.w2 = nn.Parameter(torch.randn(n, n) / n**0.5)
        self.b = nn.Parameter(torch.randn(n) * 0.1)

    def forward(self, x):
        return x @ torch.tanh(self.w1 @ self.w2) + self.b


def get_inputs():
    return [torch.randn(16, 128)]


def get_init_inputs():
    return [128]
