import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Padding-mode spellings in climate / physics / medical nets: Conv2d(padding_mode='circular') for periodic longitude, F.pad(mode='circular') on width only then zero pad on height, Conv2d(padding_mode='replicate'), Conv1d(padding='same', dilation=2), Conv3d with ReplicationPad3d, nn.Upsample(scale_factor=2, mode='trilinear', align_corners=False) and ConvTranspose3d in a 3D decoder."""
    def __init__(self, c=8):
        super().__init__()
        self.circ = nn.Conv2d(c, c, 3, padding=1, padding_mode="circular")
        self.mixed = nn.Conv2d(c, c, 3)
        self.rep = nn.Conv2d(c, c, 3, padding=1, padding_mode="replicate")
        self.same1d = nn.Conv1d(c, c, 3, padding="same", dilation=2)
        self.pad3 = nn.ReplicationPad3d(1)
        self.conv3 = nn.Conv3d(c, c, 3)
        self.up = nn.Upsample(scale_factor=2, mode="trilinear", align_corners=False)
        self.tconv3 = nn.ConvTranspose3d(c, c, 2, stride=2)
        self.out3 = nn.Conv3d(2 * c, 1, 1)

    def forward(self, x2, x1, x3):
        h = torch.relu(self.circ(x2))
        h = F.pad(h, (1, 1, 0, 0), mode="circular")
        h = F.pad(h, (0, 0, 1, 1), mode="constant", value=0.0)
        h = torch.relu(self.mixed(h)) + self.rep(h[..., 1:-1, 1:-1])
        s = self.same1d(x1)
        v = torch.relu(self.conv3(self.pad3(x3)))
        v = torch.cat([self.up(v), self.tconv3(v)], dim=1)
        return h, s, self.out3(v)

def get_inputs():
    return [torch.randn(2, 8, 32, 64), torch.randn(2, 8, 100), torch.randn(2, 8, 8, 16, 16)]

def get_init_inputs():
    return [8]
