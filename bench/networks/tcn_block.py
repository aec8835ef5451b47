"""A temporal-convolution residual block: two dilated causal Conv1d (padding then chomp), ReLU after
each, a 1x1 convolution on the skip path where the channels change."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int = 64, cout: int = 128, kernel: int = 3, dilation: int = 4):
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv1 = nn.Conv1d(cin, cout, kernel, padding=self.pad, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, kernel, padding=self.pad, dilation=dilation)
        self.down = nn.Conv1d(cin, cout, 1)

    def forward(self, x):
        h = torch.relu(self.conv1(x)[:, :, : -self.pad])
        h = torch.relu(self.conv2(h)[:, :, : -self.pad])
        return torch.relu(h + self.down(x))


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 64, 4096)]


def get_init_inputs():
    return []
