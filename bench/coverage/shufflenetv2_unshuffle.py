import torch
import torch.nn as nn
import torch.nn.functional as F

def channel_shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)

class Model(nn.Module):
    """Pixel-unshuffle stem (space-to-depth, as in NAFNet/SR nets) then a ShuffleNetV2 unit (eval): chunk split, 1x1-dw3x3-1x1 branch with BN/ReLU, concat, channel shuffle."""
    def __init__(self, c_in=3, factor=2, c=116):
        super().__init__()
        self.stem = nn.Conv2d(c_in * factor * factor, c, 1)
        self.factor = factor
        bc = c // 2
        self.branch = nn.Sequential(
            nn.Conv2d(bc, bc, 1, bias=False), nn.BatchNorm2d(bc), nn.ReLU(inplace=True),
            nn.Conv2d(bc, bc, 3, 1, 1, groups=bc, bias=False), nn.BatchNorm2d(bc),
            nn.Conv2d(bc, bc, 1, bias=False), nn.BatchNorm2d(bc), nn.ReLU(inplace=True))
        self.eval()
    def forward(self, x):
        x = self.stem(F.pixel_unshuffle(x, self.factor))
        x1, x2 = x.chunk(2, dim=1)
        out = torch.cat((x1, self.branch(x2)), dim=1)
        return channel_shuffle(out, 2)

def get_inputs():
    return [torch.randn(8, 3, 112, 112)]

def get_init_inputs():
    return [3, 2, 116]
