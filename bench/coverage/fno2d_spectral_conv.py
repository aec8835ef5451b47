import torch
import torch.nn as nn
import torch.nn.functional as F


class SpectralConv2d(nn.Module):
    def __init__(self, cin, cout, m1, m2):
        super().__init__()
        self.cout, self.m1, self.m2 = cout, m1, m2
        scale = 1 / (cin * cout)
        self.weights1 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))

    def compl_mul2d(self, x, w):
        return torch.einsum("bixy,ioxy->boxy", x, w)

    def forward(self, x):
        B, _, H, W = x.shape
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(B, self.cout, H, W // 2 + 1, dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :self.m1, :self.m2] = self.compl_mul2d(x_ft[:, :, :self.m1, :self.m2], self.weights1)
        out_ft[:, :, -self.m1:, :self.m2] = self.compl_mul2d(x_ft[:, :, -self.m1:, :self.m2], self.weights2)
        return torch.fft.irfft2(out_ft, s=(H, W))


class Model(nn.Module):
    """Fourier Neural Operator 2D (neuraloperator reference code): grid coordinates concatenated to the input,
    lift with Linear, two Fourier layers (rfft2, truncated modes written into a complex zeros tensor, complex
    einsum, irfft2) plus a 1x1 conv bypass and GELU, projection MLP."""
    def __init__(self, modes=12, width=32):
        super().__init__()
        self.fc0 = nn.Linear(3, width)
        self.convs = nn.ModuleList([SpectralConv2d(width, width, modes, modes) for _ in range(2)])
        self.ws = nn.ModuleList([nn.Conv2d(width, width, 1) for _ in range(2)])
        self.fc1, self.fc2 = nn.Linear(width, 128), nn.Linear(128, 1)

    def forward(self, a):
        B, H, W, _ = a.shape
        gx = torch.linspace(0, 1, H, device=a.device).view(1, H, 1, 1).expand(B, H, W, 1)
        gy = torch.linspace(0, 1, W, device=a.device).view(1, 1, W, 1).expand(B, H, W, 1)
        x = self.fc0(torch.cat((a, gx, gy), dim=-1)).permute(0, 3, 1, 2)
        for conv, w in zip(self.convs, self.ws):
            x = F.gelu(conv(x) + w(x))
        x = x.permute(0, 2, 3, 1)
        return self.fc2(F.gelu(self.fc1(x)))


def get_inputs():
    return [torch.randn(8, 64, 64, 1)]


def get_init_inputs():
    return [12, 32]
