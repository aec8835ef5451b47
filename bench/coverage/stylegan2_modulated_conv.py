import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class ModConv(nn.Module):
    def __init__(self, cin, cout, k, w_dim, demod=True, up=False):
        super().__init__()
        self.cin, self.cout, self.k, self.demod, self.up = cin, cout, k, demod, up
        self.weight = nn.Parameter(torch.randn(1, cout, cin, k, k))
        self.scale = 1 / math.sqrt(cin * k * k)
        self.affine = nn.Linear(w_dim, cin)
        nn.init.ones_(self.affine.bias)
    def forward(self, x, w):
        B, C, H, W = x.shape
        s = self.affine(w).view(B, 1, C, 1, 1)
        weight = self.scale * self.weight * s
        if self.demod:
            d = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * d.view(B, self.cout, 1, 1, 1)
        weight = weight.view(B * self.cout, C, self.k, self.k)
        x = x.reshape(1, B * C, H, W)
        if self.up:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        out = F.conv2d(x, weight, padding=self.k // 2, groups=B)
        return out.view(B, self.cout, out.shape[-2], out.shape[-1])

class Model(nn.Module):
    """StyleGAN2 synthesis block: modulated/demodulated convs done as one grouped conv (groups=batch, weight reshaped per sample), bilinear upsampling, per-pixel noise from torch.randn scaled by a learned strength, fused leaky ReLU with sqrt(2) gain, ToRGB without demodulation plus upsampled skip RGB."""
    def __init__(self, cin=64, cout=32, w_dim=64):
        super().__init__()
        self.conv0 = ModConv(cin, cout, 3, w_dim, up=True)
        self.conv1 = ModConv(cout, cout, 3, w_dim)
        self.torgb = ModConv(cout, 3, 1, w_dim, demod=False)
        self.noise_strength = nn.Parameter(torch.zeros(2))
        self.bias0 = nn.Parameter(torch.zeros(1, cout, 1, 1))
        self.bias1 = nn.Parameter(torch.zeros(1, cout, 1, 1))
        self.rgb_bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x, img, ws):
        x = self.conv0(x, ws[:, 0])
        B, _, H, W = x.shape
        x = x + torch.randn(B, 1, H, W, device=x.device) * self.noise_strength[0]
        x = F.leaky_relu(x + self.bias0, 0.2) * math.sqrt(2)
        x = self.conv1(x, ws[:, 1])
        x = x + torch.randn(B, 1, H, W, device=x.device) * self.noise_strength[1]
        x = F.leaky_relu(x + self.bias1, 0.2) * math.sqrt(2)
        y = self.torgb(x, ws[:, 2]) + self.rgb_bias
        img = F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False) + y
        return x, img

def get_inputs():
    return [torch.randn(4, 64, 16, 16), torch.randn(4, 3, 16, 16), torch.randn(4, 3, 64)]

def get_init_inputs():
    return [64, 32, 64]
