import torch
import torch.nn as nn

class Model(nn.Module):
    """MobileViT block: local conv, unfold into patches via reshape/transpose, transformer, fold back, fuse."""
    def __init__(self, c=64, d=96, ph=2, pw=2):
        super().__init__()
        self.ph, self.pw = ph, pw
        self.local = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.SiLU(),
                                   nn.Conv2d(c, d, 1, bias=False))
        self.tr = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True, norm_first=True,
                                             activation='gelu')
        self.proj = nn.Sequential(nn.Conv2d(d, c, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.fuse = nn.Sequential(nn.Conv2d(2 * c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.eval()
    def forward(self, x):
        res = x
        y = self.local(x)
        B, D, H, W = y.shape
        ph, pw = self.ph, self.pw
        nh, nw = H // ph, W // pw
        y = y.reshape(B * D * nh, ph, nw, pw).transpose(1, 2)
        y = y.reshape(B, D, nh * nw, ph * pw).transpose(1, 3)
        y = y.reshape(B * ph * pw, nh * nw, D)
        y = self.tr(y)
        y = y.contiguous().view(B, ph * pw, nh * nw, D).transpose(1, 3)
        y = y.reshape(B * D * nh, nw, ph, pw).transpose(1, 2)
        y = y.reshape(B, D, H, W)
        y = self.proj(y)
        return self.fuse(torch.cat([res, y], dim=1))

def get_inputs():
    return [torch.randn(4, 64, 32, 32)]

def get_init_inputs():
    return [64, 96, 2, 2]
