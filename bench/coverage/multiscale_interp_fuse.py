import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """HRNet/UPerNet-style fusion exercising interpolate modes: bilinear align_corners=True to a size, nearest scale_factor=2, bicubic scale_factor=4 align_corners=False, area downsample, concat, 1x1 conv."""
    def __init__(self, c=32):
        super().__init__()
        self.fuse = nn.Conv2d(4 * c, c, 1)
        self.bn = nn.BatchNorm2d(c)
        self.eval()
    def forward(self, f4, f8, f16, f2):
        H, W = f4.shape[-2:]
        a = F.interpolate(f8, size=(H, W), mode="bilinear", align_corners=True)
        b = F.interpolate(F.interpolate(f16, scale_factor=2, mode="nearest"), size=(H, W), mode="bilinear", align_corners=False)
        c = F.interpolate(f16, scale_factor=4, mode="bicubic", align_corners=False)
        d = F.interpolate(f2, size=(H, W), mode="area")
        x = torch.cat([f4 + a, b, c, d], dim=1)
        return F.relu(self.bn(self.fuse(x)))

def get_inputs():
    return [torch.randn(2, 32, 64, 64), torch.randn(2, 32, 32, 32), torch.randn(2, 32, 16, 16), torch.randn(2, 32, 128, 128)]

def get_init_inputs():
    return [32]
