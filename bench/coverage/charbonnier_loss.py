import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, eps=1e-3):
        super().__init__()
        self.eps = eps
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
    def forward(self, x, target):
        diff = self.conv(x) - target
        return torch.mean(torch.sqrt(diff * diff + self.eps * self.eps))

def get_inputs():
    return [torch.randn(8, 3, 128, 128), torch.randn(8, 3, 128, 128)]

def get_init_inputs():
    return [1e-3]
