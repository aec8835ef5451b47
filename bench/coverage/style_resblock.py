"""Fast style transfer residual block: ReflectionPad2d, conv 3x3, InstanceNorm2d(affine), ReLU, again, residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c=128):
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c, affine=True), nn.ReLU(inplace=True),
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c, affine=True),
        )

    def forward(self, x):
        return x + self.block(x)


def get_inputs():
    return [torch.randn(4, 128, 64, 64)]


def get_init_inputs():
    return []
