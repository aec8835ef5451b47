import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """StyleGAN2 discriminator epilogue: minibatch stddev layer, conv, flatten, linear."""
    def __init__(self, c=256, group=4, nfeat=1):
        super().__init__()
        self.group, self.nfeat = group, nfeat
        self.conv = nn.Conv2d(c + 1, c, 3, padding=1)
        self.fc = nn.Linear(c * 4 * 4, c)
        self.out = nn.Linear(c, 1)
    def forward(self, x):
        N, C, H, W = x.shape
        G = min(self.group, N)
        y = x.reshape(G, -1, self.nfeat, C // self.nfeat, H, W)
        y = y - y.mean(dim=0)
        y = y.square().mean(dim=0)
        y = (y + 1e-8).sqrt()
        y = y.mean(dim=[2, 3, 4])
        y = y.reshape(-1, self.nfeat, 1, 1)
        y = y.repeat(G, 1, H, W)
        x = torch.cat([x, y], dim=1)
        x = F.leaky_relu(self.conv(x), 0.2)
        x = F.leaky_relu(self.fc(x.flatten(1)), 0.2)
        return self.out(x)

def get_inputs():
    return [torch.randn(16, 256, 4, 4)]

def get_init_inputs():
    return [256, 4, 1]
