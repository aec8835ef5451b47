import torch
import torch.nn as nn

class Pooling(nn.Module):
    def __init__(self, pool_size=3):
        super().__init__()
        self.pool = nn.AvgPool2d(pool_size, stride=1, padding=pool_size // 2, count_include_pad=False)
    def forward(self, x):
        return self.pool(x) - x

class Model(nn.Module):
    """PoolFormer block: GroupNorm(1, C), avg-pool token mixer, conv MLP, layer scale."""
    def __init__(self, dim=64, mlp_ratio=4, ls_init=1e-5):
        super().__init__()
        self.norm1 = nn.GroupNorm(1, dim)
        self.token_mixer = Pooling(3)
        self.norm2 = nn.GroupNorm(1, dim)
        self.fc1 = nn.Conv2d(dim, dim * mlp_ratio, 1)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(dim * mlp_ratio, dim, 1)
        self.ls1 = nn.Parameter(ls_init * torch.ones(dim))
        self.ls2 = nn.Parameter(ls_init * torch.ones(dim))
    def forward(self, x):
        x = x + self.ls1.unsqueeze(-1).unsqueeze(-1) * self.token_mixer(self.norm1(x))
        x = x + self.ls2.unsqueeze(-1).unsqueeze(-1) * self.fc2(self.act(self.fc1(self.norm2(x))))
        return x

def get_inputs():
    return [torch.randn(4, 64, 56, 56)]

def get_init_inputs():
    return [64, 4, 1e-5]
