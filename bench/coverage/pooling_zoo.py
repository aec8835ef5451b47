import torch
import torch.nn as nn

class Model(nn.Module):
    """Less common pooling layers in one head: LPPool2d(p=2), LPPool1d(p=3) over time, AdaptiveMaxPool2d(return_indices=True) whose indices feed a spatial-position feature, FractionalMaxPool2d(output_ratio=0.5) (random pooling regions, as in training)."""
    def __init__(self, c=32):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.lp2 = nn.LPPool2d(2, kernel_size=2, stride=2)
        self.lp1 = nn.LPPool1d(3, kernel_size=4, stride=2)
        self.amp = nn.AdaptiveMaxPool2d((4, 4), return_indices=True)
        self.frac = nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))
        self.fc = nn.Linear(c * 16 * 2 + c * 7 + c * 8 * 8, 10)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        a = self.lp2(h)                                 # B, c, 16, 16
        t = self.lp1(a.mean(dim=2))                     # B, c, 7
        m, idx = self.amp(a)                            # B, c, 4, 4
        pos = idx.float() / (a.shape[-1] * a.shape[-2])
        f = self.frac(a)                                # B, c, 8, 8
        z = torch.cat([m.flatten(1), pos.flatten(1), t.flatten(1), f.flatten(1)], dim=1)
        return self.fc(z)

def get_inputs():
    return [torch.randn(4, 3, 32, 32)]

def get_init_inputs():
    return [32]
