import torch
import torch.nn as nn

class Model(nn.Module):
    """EfficientFormer Meta4D block (eval): pool mixer, 1x1 conv MLP with BatchNorm, layer scale."""
    def __init__(self, dim=48, hidden=192):
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.fc1 = nn.Conv2d(dim, hidden, 1)
        self.norm1 = nn.BatchNorm2d(hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(hidden, dim, 1)
        self.norm2 = nn.BatchNorm2d(dim)
        self.ls1 = nn.Parameter(1e-5 * torch.ones(dim))
        self.ls2 = nn.Parameter(1e-5 * torch.ones(dim))
        for bn in (self.norm1, self.norm2):
            bn.running_mean.uniform_(-0.1, 0.1); bn.running_var.uniform_(0.5, 1.5)
        self.eval()
    def forward(self, x):
        x = x + self.ls1.view(1, -1, 1, 1) * (self.pool(x) - x)
        y = self.norm2(self.fc2(self.act(self.norm1(self.fc1(x)))))
        return x + self.ls2.view(1, -1, 1, 1) * y

def get_inputs():
    return [torch.randn(8, 48, 56, 56)]

def get_init_inputs():
    return [48, 192]
