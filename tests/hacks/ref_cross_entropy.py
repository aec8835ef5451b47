"""Reference: cross-entropy over class logits, PyTorch's default ignore_index (-100), written for
the hack suite."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target)


def get_inputs():
    return [torch.randn(256, 10), torch.randint(0, 10, (256,))]


def get_init_inputs():
    return []
