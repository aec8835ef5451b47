import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm

class TemporalBlock(nn.Module):
    def __init__(self, i, o, k, d):
        super().__init__()
        self.pad = (k - 1) * d
        self.c1 = weight_norm(nn.Conv1d(i, o, k, padding=self.pad, dilation=d))
        self.c2 = weight_norm(nn.Conv1d(o, o, k, padding=self.pad, dilation=d))
        self.down = nn.Conv1d(i, o, 1) if i != o else None
        self.drop = nn.Dropout(0.2)
    def forward(self, x):
        y = self.drop(torch.relu(self.c1(x)[:, :, :-self.pad]))
        y = self.drop(torch.relu(self.c2(y)[:, :, :-self.pad]))
        r = x if self.down is None else self.down(x)
        return torch.relu(y + r)

class Model(nn.Module):
    def __init__(self, cin=32, chans=(64, 64, 64), k=3):
        super().__init__()
        layers, prev = [], cin
        for i, c in enumerate(chans):
            layers.append(TemporalBlock(prev, c, k, 2 ** i)); prev = c
        self.net = nn.Sequential(*layers)
        self.eval()
    def forward(self, x):
        return self.net(x)

def get_inputs():
    return [torch.randn(16, 32, 512)]

def get_init_inputs():
    return [32, (64, 64, 64), 3]
