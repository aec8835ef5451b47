"""Reference: exp of a linear layer, minus a constant, over features near 1 (Mamba2's exponentials in
small). Half of a row of 1024 weights times 4 (k of them, about 512) takes that row's logits to
0.0389 * 0.99 * (1024 + 3k): past float32's exp range (88.7) for k above about 426, past it after the
shift (108.7) only for k above about 599, each five standard deviations of k away. So the reference
stays finite on every weights-changed set, and a candidate that splits the shift off
(exp(x W^T) * exp(-20)) overflows on the changed rows, where the reference lies past 1.8e19."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            self.linear.weight.fill_(0.0389)

    def forward(self, x):
        return torch.exp(self.linear(torch.sigmoid(2.0 * x)) - 20.0)


def get_inputs():
    return [torch.rand(32, 1024) + 2.0]


def get_init_inputs():
    return [1024, 16]
