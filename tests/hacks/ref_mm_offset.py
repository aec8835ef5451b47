"""Reference: a random-sign projection (entries +-1) of features near 1.5 (a jitter under 4.75e-4),
written for the hack suite (a red-team review, 2026-12-04). A matmul: rtol 1e-2 under TF32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [1.5 + 9.5e-4 * (torch.rand(256, 256) - 0.5), torch.randint(0, 2, (256, 128)).float() * 2 - 1]


def get_init_inputs():
    return []
