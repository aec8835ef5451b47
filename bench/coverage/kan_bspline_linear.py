import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """efficient-KAN KANLinear: SiLU base path + B-spline basis computed by Cox-de Boor recursion over a grid buffer (comparisons, casts, slicing), spline weights via F.linear."""
    def __init__(self, fin=64, fout=64, grid_size=5, spline_order=3):
        super().__init__()
        self.fin, self.fout, self.k = fin, fout, spline_order
        h = 2.0 / grid_size
        grid = (torch.arange(-spline_order, grid_size + spline_order + 1) * h - 1.0).expand(fin, -1).contiguous()
        self.register_buffer("grid", grid)
        self.base_weight = nn.Parameter(torch.randn(fout, fin) * 0.1)
        self.spline_weight = nn.Parameter(torch.randn(fout, fin, grid_size + spline_order) * 0.1)
        self.spline_scaler = nn.Parameter(torch.ones(fout, fin))
    def b_splines(self, x):
        grid = self.grid
        x = x.unsqueeze(-1)
        bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
        for k in range(1, self.k + 1):
            bases = ((x - grid[:, : -(k + 1)]) / (grid[:, k:-1] - grid[:, : -(k + 1)]) * bases[:, :, :-1]) + \
                    ((grid[:, k + 1:] - x) / (grid[:, k + 1:] - grid[:, 1:(-k)]) * bases[:, :, 1:])
        return bases.contiguous()
    def forward(self, x):
        base = F.linear(F.silu(x), self.base_weight)
        w = (self.spline_weight * self.spline_scaler.unsqueeze(-1)).view(self.fout, -1)
        spline = F.linear(self.b_splines(x).view(x.size(0), -1), w)
        return base + spline

def get_inputs():
    return [torch.rand(256, 64) * 2 - 1]

def get_init_inputs():
    return [64, 64, 5, 3]
