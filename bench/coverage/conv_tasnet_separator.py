import torch
import torch.nn as nn
import torch.nn.functional as F

class GlobalLayerNorm(nn.Module):
    def __init__(self, c, eps=1e-8):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(1, c, 1))
        self.beta = nn.Parameter(torch.zeros(1, c, 1))
        self.eps = eps
    def forward(self, y):
        mean = y.mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)
        var = (torch.pow(y - mean, 2)).mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)
        return self.gamma * (y - mean) / torch.pow(var + self.eps, 0.5) + self.beta

class TemporalBlock(nn.Module):
    def __init__(self, B, H, P, dilation):
        super().__init__()
        self.conv1x1 = nn.Conv1d(B, H, 1, bias=False)
        self.prelu1, self.norm1 = nn.PReLU(), GlobalLayerNorm(H)
        self.dw = nn.Conv1d(H, H, P, padding=(P - 1) * dilation // 2, dilation=dilation, groups=H, bias=False)
        self.prelu2, self.norm2 = nn.PReLU(), GlobalLayerNorm(H)
        self.pw = nn.Conv1d(H, B, 1, bias=False)
    def forward(self, x):
        y = self.norm1(self.prelu1(self.conv1x1(x)))
        y = self.norm2(self.prelu2(self.dw(y)))
        return x + self.pw(y)

class Model(nn.Module):
    """Conv-TasNet: strided Conv1d encoder + ReLU, cLN-free gLN bottleneck, TCN of dilated depthwise blocks with PReLU and gLN, per-speaker sigmoid masks, ConvTranspose1d decoder (stride L/2)."""
    def __init__(self, N=64, L=16, B=32, H=64, P=3, X=4, R=2, C=2):
        super().__init__()
        self.C, self.N = C, N
        self.encoder = nn.Conv1d(1, N, L, stride=L // 2, bias=False)
        self.ln = GlobalLayerNorm(N)
        self.bottleneck = nn.Conv1d(N, B, 1, bias=False)
        self.tcn = nn.Sequential(*[TemporalBlock(B, H, P, 2 ** x) for _ in range(R) for x in range(X)])
        self.mask_conv = nn.Conv1d(B, C * N, 1, bias=False)
        self.decoder = nn.ConvTranspose1d(N, 1, L, stride=L // 2, bias=False)

    def forward(self, mixture):
        w = F.relu(self.encoder(mixture.unsqueeze(1)))       # M, N, K
        y = self.tcn(self.bottleneck(self.ln(w)))
        M, _, K = w.shape
        masks = torch.sigmoid(self.mask_conv(y).view(M, self.C, self.N, K))
        est = w.unsqueeze(1) * masks                          # M, C, N, K
        out = self.decoder(est.view(M * self.C, self.N, K))
        return out.view(M, self.C, -1)

def get_inputs():
    return [torch.randn(2, 4000)]

def get_init_inputs():
    return [64, 16, 32, 64, 3, 4, 2, 2]
