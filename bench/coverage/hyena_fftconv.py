import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d=128, L=1024):
        super().__init__()
        self.proj = nn.Linear(d, 3 * d)
        self.filt = nn.Parameter(torch.randn(d, L) * 0.02)
        self.bias = nn.Parameter(torch.zeros(d))
        self.out = nn.Linear(d, d)
    def forward(self, u):
        L = u.shape[1]
        x1, x2, v = self.proj(u).transpose(1, 2).chunk(3, dim=1)
        v = v * x1
        n = 2 * L
        kf = torch.fft.rfft(self.filt, n=n) / n
        vf = torch.fft.rfft(v, n=n)
        y = torch.fft.irfft(vf * kf, n=n, norm='forward')[..., :L]
        y = y + v * self.bias[:, None]
        y = y * x2
        return self.out(y.transpose(1, 2))

def get_inputs():
    return [torch.randn(4, 1024, 128)]

def get_init_inputs():
    return [128, 1024]
