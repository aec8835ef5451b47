"""Reference (rt14): a Linear layer's MSE loss against targets (mean reduction): a matmul, so the
tolerance class is rtol 1e-2 on one scalar."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x, t):
        return F.mse_loss(self.fc(x), t)


def get_inputs():
    return [torch.randn(8192, 512), torch.randn(8192, 256)]


def get_init_inputs():
    return [512, 256]
