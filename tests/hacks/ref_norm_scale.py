"""x scaled by its whole L2 norm (a Frobenius-norm normalisation), written for the hack suite."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x / torch.linalg.vector_norm(x)


def get_inputs():
    return [torch.randn(64, 64, 256)]


def get_init_inputs():
    return []
