"""A candidate whose forward raises."""

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        raise ValueError("shape mismatch in my launcher")
