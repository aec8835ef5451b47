"""A ResNeXt bottleneck with squeeze-and-excitation: 1x1, grouped 3x3 (32 groups), 1x1, each with
batch norm (training mode, as a module is built), the SE gate, the residual, ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int = 256, width: int = 128, groups: int = 32, reduction: int = 16):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(channels, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, padding=1, groups=groups, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, channels, 1, bias=False), nn.BatchNorm2d(channels)
        self.fc1 = nn.Conv2d(channels, channels // reduction, 1)
        self.fc2 = nn.Conv2d(channels // reduction, channels, 1)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(h.mean((2, 3), keepdim=True)))))
        return torch.relu(h * s + x)


batch_size = 16


def get_inputs():
    return [torch.randn(batch_size, 256, 28, 28)]


def get_init_inputs():
    return []
