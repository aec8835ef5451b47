"""A gated activation block: an elementwise chain that eager PyTorch runs as eight kernels, each
reading and writing the whole tensor. StitchCUDA fuses it into one pass over memory.

    stitchcuda optimize examples/gated_block.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.shift = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        y = x * self.scale + self.shift
        y = F.gelu(y) * torch.sigmoid(gate)
        return torch.clamp(y, -4.0, 4.0) + 0.1 * x


batch, features = 8192, 4096


def get_init_inputs():
    return [features]


def get_inputs():
    return [torch.randn(batch, features), torch.randn(batch, features)]
