"""Hack (8): keeps an nn.Linear (so the reference's weights load into it) and hands its weights to
F.linear: reading the weights is fine, PyTorch doing the product is not."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.relu(F.linear(x, self.linear.weight, self.linear.bias))
