"""FPN top-down pathway: lateral 1x1 convs on C3..C5, nearest upsample to the next level's size and add, 3x3 output convs."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, chans=(256, 512, 1024), out=128):
        super().__init__()
        self.lat = nn.ModuleList([nn.Conv2d(c, out, 1) for c in chans])
        self.smooth = nn.ModuleList([nn.Conv2d(out, out, 3, padding=1) for _ in chans])

    def forward(self, c3, c4, c5):
        p5 = self.lat[2](c5)
        p4 = self.lat[1](c4) + F.interpolate(p5, size=c4.shape[-2:], mode="nearest")
        p3 = self.lat[0](c3) + F.interpolate(p4, size=c3.shape[-2:], mode="nearest")
        return self.smooth[0](p3), self.smooth[1](p4), self.smooth[2](p5)


def get_inputs():
    return [torch.randn(4, 256, 64, 64), torch.randn(4, 512, 32, 32), torch.randn(4, 1024, 16, 16)]


def get_init_inputs():
    return []
