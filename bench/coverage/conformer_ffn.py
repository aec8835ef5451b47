import torch
import torch.nn as nn

class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)

class Model(nn.Module):
    def __init__(self, d=256, expansion=4, dropout=0.1):
        super().__init__()
        self.ff = nn.Sequential(
            nn.LayerNorm(d), nn.Linear(d, d * expansion), Swish(), nn.Dropout(dropout),
            nn.Linear(d * expansion, d), nn.Dropout(dropout))
        self.eval()
    def forward(self, x):
        return x + 0.5 * self.ff(x)

def get_inputs():
    return [torch.randn(16, 200, 256)]

def get_init_inputs():
    return [256, 4, 0.1]
