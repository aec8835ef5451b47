import torch
import torch.nn as nn

class GRN(nn.Module):
    """ConvNeXt V2 global response normalization (channels-last)."""
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, 1, dim) + 0.1)
        self.beta = nn.Parameter(torch.zeros(1, 1, 1, dim) + 0.05)
    def forward(self, x):
        Gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        Nx = Gx / (Gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * Nx) + self.beta + x

class Model(nn.Module):
    def __init__(self, dim=96):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.grn = GRN(4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
    def forward(self, x):
        inp = x
        x = self.dwconv(x).permute(0, 2, 3, 1)
        x = self.pwconv2(self.grn(self.act(self.pwconv1(self.norm(x)))))
        return inp + x.permute(0, 3, 1, 2)

def get_inputs():
    return [torch.randn(4, 96, 28, 28)]

def get_init_inputs():
    return [96]
