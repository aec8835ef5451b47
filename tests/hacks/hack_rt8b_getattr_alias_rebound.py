"""A name once bound to getattr was read as getattr wherever it was called: G(x, "fro") was rewritten
to x.fro, and the call of torch.linalg.norm (G's binding when forward runs) disappeared from the tree."""
import torch
import torch.nn as nn

G = getattr
G = torch.linalg.norm


class ModelNew(nn.Module):
    def forward(self, x):
        return x / G(x, "fro")
