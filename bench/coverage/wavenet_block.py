import torch
import torch.nn as nn
import torch.nn.functional as F

class ResBlock(nn.Module):
    def __init__(self, res_ch, skip_ch, dilation):
        super().__init__()
        self.dilation = dilation
        self.conv = nn.Conv1d(res_ch, 2 * res_ch, 2, dilation=dilation)
        self.res = nn.Conv1d(res_ch, res_ch, 1)
        self.skip = nn.Conv1d(res_ch, skip_ch, 1)
    def forward(self, x):
        h = self.conv(F.pad(x, (self.dilation, 0)))
        a, b = h.chunk(2, dim=1)
        z = torch.tanh(a) * torch.sigmoid(b)
        return x + self.res(z), self.skip(z)

class Model(nn.Module):
    def __init__(self, res_ch=64, skip_ch=128, n_layers=6):
        super().__init__()
        self.blocks = nn.ModuleList([ResBlock(res_ch, skip_ch, 2 ** i) for i in range(n_layers)])
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip_ch, skip_ch, 1), nn.ReLU(), nn.Conv1d(skip_ch, 256, 1))
    def forward(self, x):
        skips = 0
        for b in self.blocks:
            x, s = b(x)
            skips = skips + s
        return self.out(skips)

def get_inputs():
    return [torch.randn(4, 64, 2048)]

def get_init_inputs():
    return [64, 128, 6]
