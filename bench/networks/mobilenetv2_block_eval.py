"""A MobileNetV2 inverted residual in eval mode (inference: batch norm on running statistics, as a
trained network has them): 1x1 expansion, batch norm, ReLU6, 3x3 depthwise convolution, batch norm,
ReLU6, 1x1 projection, batch norm, the residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int = 32, expand: int = 6):
        super().__init__()
        hidden = channels * expand
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels),
        )
        with torch.no_grad():  # running statistics a trained network would have
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x):
        return x + self.block(x)


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 32, 56, 56)]


def get_init_inputs():
    return []
