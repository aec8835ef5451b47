"""Reference: a cosine-similarity loss over the feature axis (KernelBench level 1's form), written
for the hack suite."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        cos = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cos)


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(8192, 4096)]


def get_init_inputs():
    return []
