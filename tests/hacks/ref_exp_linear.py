"""Reference: exp of a linear layer over bounded features (Mamba2's exponentials in small). Its
weights keep every output finite on any input (the features lie in (0, 1)), and a few rows of the
weight times 4 take some outputs past float32's largest: the reference then overflows."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # (The shift a constant, not a bias: a rows set that changed the bias of the row it changed
        # took that row's logits down by 60, and the candidate's own overflow stood alone, 1 run in 16.)
        self.linear = nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            self.linear.weight.fill_(1.35)  # logits below 1.35 * 64 - 20 on any input

    def forward(self, x):
        return torch.exp(self.linear(torch.sigmoid(2.0 * x)) - 20.0)


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64, 16]
