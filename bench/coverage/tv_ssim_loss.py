import torch
import torch.nn as nn
import torch.nn.functional as F

def gaussian(ws, sigma):
    g = torch.exp(-(torch.arange(ws, dtype=torch.float32) - ws // 2) ** 2 / (2 * sigma ** 2))
    return g / g.sum()

class Model(nn.Module):
    """Image restoration loss: SSIM with a fixed separable Gaussian window (grouped conv2d), total-variation via torch.diff, L1; weighted sum."""
    def __init__(self, channels=3, ws=11):
        super().__init__()
        g = gaussian(ws, 1.5)
        w = (g[:, None] @ g[None, :]).expand(channels, 1, ws, ws).contiguous()
        self.register_buffer("window", w)
        self.c, self.ws = channels, ws
    def forward(self, img1, img2):
        p = self.ws // 2
        mu1 = F.conv2d(img1, self.window, padding=p, groups=self.c)
        mu2 = F.conv2d(img2, self.window, padding=p, groups=self.c)
        s11 = F.conv2d(img1 * img1, self.window, padding=p, groups=self.c) - mu1.pow(2)
        s22 = F.conv2d(img2 * img2, self.window, padding=p, groups=self.c) - mu2.pow(2)
        s12 = F.conv2d(img1 * img2, self.window, padding=p, groups=self.c) - mu1 * mu2
        C1, C2 = 0.01 ** 2, 0.03 ** 2
        ssim = ((2 * mu1 * mu2 + C1) * (2 * s12 + C2)) / ((mu1.pow(2) + mu2.pow(2) + C1) * (s11 + s22 + C2))
        tv = torch.diff(img1, dim=-1).abs().mean() + torch.diff(img1, dim=-2).abs().mean()
        return (1 - ssim.mean()) + 0.1 * tv + F.l1_loss(img1, img2)

def get_inputs():
    return [torch.rand(4, 3, 96, 96), torch.rand(4, 3, 96, 96)]

def get_init_inputs():
    return [3, 11]
