import torch
import torch.nn as nn

def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

class Model(nn.Module):
    """Barlow Twins loss: projector, BatchNorm1d(affine=False) in training mode on each view, cross-correlation, on-diagonal (torch.diagonal) and off-diagonal (flatten/view trick) terms."""
    def __init__(self, d_in=512, d=1024, lambd=0.0051):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(d_in, d, bias=False), nn.BatchNorm1d(d), nn.ReLU(), nn.Linear(d, d, bias=False))
        self.bn = nn.BatchNorm1d(d, affine=False)
        self.lambd = lambd
    def forward(self, y1, y2):
        z1, z2 = self.proj(y1), self.proj(y2)
        c = self.bn(z1).T @ self.bn(z2)
        c = c / y1.shape[0]
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + self.lambd * off_diag

def get_inputs():
    return [torch.randn(64, 512), torch.randn(64, 512)]

def get_init_inputs():
    return [512, 1024, 0.0051]
