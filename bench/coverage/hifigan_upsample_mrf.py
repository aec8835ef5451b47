import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """HiFi-GAN generator stage: leaky_relu(0.1), ConvTranspose1d upsample x8, multi-receptive-field fusion of dilated Conv1d resblocks (k=3, d=1,3,5) averaged."""
    def __init__(self, cin=256, cout=128, up=8, ks=(3, 7)):
        super().__init__()
        self.up = nn.ConvTranspose1d(cin, cout, up * 2, up, padding=up // 2)
        self.blocks = nn.ModuleList()
        for k in ks:
            self.blocks.append(nn.ModuleList([nn.Conv1d(cout, cout, k, 1, dilation=d, padding=d * (k - 1) // 2) for d in (1, 3, 5)]))
        self.n = len(ks)
    def forward(self, x):
        x = self.up(F.leaky_relu(x, 0.1))
        xs = None
        for convs in self.blocks:
            h = x
            for c in convs:
                h = h + c(F.leaky_relu(h, 0.1))
            xs = h if xs is None else xs + h
        return torch.tanh(xs / self.n)

def get_inputs():
    return [torch.randn(2, 256, 64)]

def get_init_inputs():
    return [256, 128, 8, (3, 7)]
