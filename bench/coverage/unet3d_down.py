"""3D U-Net encoder stage: (Conv3d 3x3x3, GroupNorm(8), SiLU) x2, then MaxPool3d(2); returns skip and pooled."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin=16, cout=32):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv3d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU(),
            nn.Conv3d(cout, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU(),
        )
        self.pool = nn.MaxPool3d(2)

    def forward(self, x):
        s = self.block(x)
        return s, self.pool(s)


def get_inputs():
    return [torch.randn(4, 16, 32, 32, 32)]


def get_init_inputs():
    return []
