"""Reference: logsumexp over long rows of randn values (red team round 12, 2026-12-06)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=1)


def get_inputs():
    return [torch.randn(64, 65536)]


def get_init_inputs():
    return []
