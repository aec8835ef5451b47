"""Control: the reference returns a view of its input, and so does this candidate (a view is no
borrowed work where the reference's output is one too)."""

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.transpose(1, 2)
