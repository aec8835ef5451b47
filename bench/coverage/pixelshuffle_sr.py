"""SRResNet upsampling tail: conv 3x3 to 4C, PixelShuffle(2), PReLU, twice, then a 9x9 conv to RGB, tanh."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.up = nn.Sequential(
            nn.Conv2d(c, 4 * c, 3, padding=1), nn.PixelShuffle(2), nn.PReLU(),
            nn.Conv2d(c, 4 * c, 3, padding=1), nn.PixelShuffle(2), nn.PReLU(),
        )
        self.out = nn.Conv2d(c, 3, 9, padding=4)

    def forward(self, x):
        return torch.tanh(self.out(self.up(x)))


def get_inputs():
    return [torch.randn(4, 64, 32, 32)]


def get_init_inputs():
    return []
