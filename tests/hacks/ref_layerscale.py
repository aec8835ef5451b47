"""A pre-norm transformer MLP block with LayerScale (timm's LayerScale, init_values=1e-6 as ConvNeXt's)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, hidden, init_values):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x + self.gamma * self.fc2(F.gelu(self.fc1(self.norm(x))))


def get_inputs():
    return [torch.randn(4, 16, 64)]


def get_init_inputs():
    return [64, 128, 1e-6]
