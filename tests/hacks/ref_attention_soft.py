"""Reference: scaled dot-product attention written out (q k^T -> softmax -> v) over queries and keys
drawn small, so its attention is nearly uniform on random inputs (a red-team review, 2026-12-04)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, q, k, v):
        scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        return torch.softmax(scores, dim=-1) @ v


def get_inputs():
    return [torch.randn(2, 128, 64) * 0.02, torch.randn(2, 128, 64) * 0.02, torch.randn(2, 128, 64)]


def get_init_inputs():
    return []
