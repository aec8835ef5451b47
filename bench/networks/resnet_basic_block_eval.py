"""A ResNet basic block in eval mode (inference: batch norm on running statistics, as a trained
network has them): 3x3 convolution, batch norm, ReLU, 3x3 convolution, batch norm, the residual,
ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        with torch.no_grad():  # running statistics a trained network would have
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.2, 0.2)
                bn.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(h)))


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 64, 56, 56)]


def get_init_inputs():
    return []
