import torch
import torch.nn as nn

class Model(nn.Module):
    """Layer modules rarely seen together: nn.PixelUnshuffle(2) stem (space-to-depth), nn.ChannelShuffle(groups) between grouped convs, nn.Unfold(3, padding=1, stride=2) local-patch features fed to a Linear, nn.LocalResponseNorm (AlexNet), InstanceNorm2d(track_running_stats=True) in eval, nn.Bilinear fusing two pooled descriptors."""
    def __init__(self, c=16, g=4, ncls=10):
        super().__init__()
        self.unshuffle = nn.PixelUnshuffle(2)
        self.gconv1 = nn.Conv2d(12, 4 * c, 3, padding=1, groups=g if 12 % g == 0 else 1)
        self.shuffle = nn.ChannelShuffle(g)
        self.gconv2 = nn.Conv2d(4 * c, 4 * c, 3, padding=1, groups=g)
        self.lrn = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
        self.inorm = nn.InstanceNorm2d(4 * c, affine=True, track_running_stats=True)
        self.unfold = nn.Unfold(kernel_size=3, padding=1, stride=2)
        self.patch_fc = nn.Linear(4 * c * 9, c)
        self.bil = nn.Bilinear(c, 4 * c, ncls)
        self.eval()

    def forward(self, x):
        h = self.unshuffle(x)
        h = torch.relu(self.gconv1(h))
        h = self.shuffle(h)
        h = self.lrn(torch.relu(self.gconv2(h)))
        h = self.inorm(h)
        p = self.unfold(h).transpose(1, 2)              # B, L, C*9
        a = torch.relu(self.patch_fc(p)).mean(1)
        b = h.mean(dim=(2, 3))
        return self.bil(a, b)

def get_inputs():
    return [torch.randn(4, 3, 32, 32)]

def get_init_inputs():
    return [16, 4, 10]
