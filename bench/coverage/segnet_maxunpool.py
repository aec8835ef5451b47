import torch
import torch.nn as nn

class Model(nn.Module):
    """SegNet-style encoder/decoder: MaxPool2d(return_indices=True) in the encoder, MaxUnpool2d with the saved indices (and output_size) in the decoder; eval BatchNorm."""
    def __init__(self, cin=3, c=32, ncls=5):
        super().__init__()
        def cbr(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
        self.enc1, self.enc2 = cbr(cin, c), cbr(c, 2 * c)
        self.pool = nn.MaxPool2d(2, 2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2, 2)
        self.dec2, self.dec1 = cbr(2 * c, c), cbr(c, c)
        self.cls = nn.Conv2d(c, ncls, 1)
        self.eval()

    def forward(self, x):
        x1 = self.enc1(x)
        p1, i1 = self.pool(x1)
        x2 = self.enc2(p1)
        p2, i2 = self.pool(x2)
        u2 = self.unpool(p2, i2, output_size=x2.size())
        d2 = self.dec2(u2)
        u1 = self.unpool(d2, i1, output_size=x1.size())
        return self.cls(self.dec1(u1))

def get_inputs():
    return [torch.randn(2, 3, 64, 64)]

def get_init_inputs():
    return [3, 32, 5]
