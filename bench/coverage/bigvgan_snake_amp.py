"""BigVGAN/DAC Snake activation x + 1/(alpha+eps) * sin(alpha*x)^2 with per-channel log-scale alpha (exp), inside an AMP-style residual unit: snake, dilated Conv1d (dilations 1,3,5, 'same' padding), snake, 1x1 Conv1d, residual; transposed-conv upsample first."""
import torch
import torch.nn as nn


class Snake(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.zeros(1, c, 1) + 0.1)

    def forward(self, x):
        a = torch.exp(self.log_alpha)
        return x + (1.0 / (a + 1e-9)) * torch.pow(torch.sin(x * a), 2)


class Model(nn.Module):
    def __init__(self, cin=128, c=64):
        super().__init__()
        self.up = nn.ConvTranspose1d(cin, c, 8, stride=4, padding=2)
        self.units = nn.ModuleList()
        for d in (1, 3, 5):
            self.units.append(nn.ModuleList([Snake(c), nn.Conv1d(c, c, 7, dilation=d, padding=3 * d), Snake(c), nn.Conv1d(c, c, 1)]))

    def forward(self, x):
        x = self.up(x)
        for s1, c1, s2, c2 in self.units:
            x = x + c2(s2(c1(s1(x))))
        return x


def get_inputs():
    return [torch.randn(2, 128, 64)]


def get_init_inputs():
    return []
