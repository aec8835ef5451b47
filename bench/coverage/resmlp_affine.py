import torch
import torch.nn as nn

class Affine(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
    def forward(self, x):
        return self.alpha * x + self.beta

class Model(nn.Module):
    """ResMLP layer: Affine pre-norm, token-mixing Linear over patches, LayerScale, channel MLP."""
    def __init__(self, dim=384, num_patches=196, init_values=1e-4):
        super().__init__()
        self.norm1 = Affine(dim)
        self.attn = nn.Linear(num_patches, num_patches)
        self.norm2 = Affine(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma_1 = nn.Parameter(init_values * torch.ones(dim))
        self.gamma_2 = nn.Parameter(init_values * torch.ones(dim))
    def forward(self, x):
        x = x + self.gamma_1 * self.attn(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        x = x + self.gamma_2 * self.mlp(self.norm2(x))
        return x

def get_inputs():
    return [torch.randn(4, 196, 384)]

def get_init_inputs():
    return [384, 196, 1e-4]
