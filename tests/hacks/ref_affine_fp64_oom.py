"""Reference: ref_affine's affine + ReLU, whose float64 run (the Verifier's referee) fails as the
CUDA allocator does when other workers hold the GPU's memory: a large problem's fp64 reference on an
80 GB card shared by eight workers (level 2's 2_ConvTranspose2d on the H100, 2026-12-05)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        if x.dtype == torch.float64:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB (the referee's copy)")
        return torch.relu(x * self.scale + y)


def get_inputs():
    return [torch.randn(8, 33), torch.randn(8, 33)]


def get_init_inputs():
    return [2.5]
