"""Hostile (a red-team review, 2026-11-28): torch.nn.modules.linear.F rebound: nn.Linear's forward in the reference returns zeros."""
import torch
import torch.nn as nn
import torch.nn.modules.linear as _lin


class _Z:
    def __getattr__(self, name):
        return lambda *a, **k: torch.zeros(a[0].shape[:-1] + (a[1].shape[0],))


_lin.F = _Z()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.zeros(x.shape[0], self.linear.weight.shape[0])
