import torch
import torch.nn as nn

class Model(nn.Module):
    """SE-ResNeXt-50 bottleneck (32x4d), eval mode."""
    def __init__(self, inp=256, planes=128, groups=32, r=16):
        super().__init__()
        w = planes
        self.conv1 = nn.Conv2d(inp, w, 1, bias=False); self.bn1 = nn.BatchNorm2d(w)
        self.conv2 = nn.Conv2d(w, w, 3, padding=1, groups=groups, bias=False); self.bn2 = nn.BatchNorm2d(w)
        self.conv3 = nn.Conv2d(w, inp, 1, bias=False); self.bn3 = nn.BatchNorm2d(inp)
        self.fc1 = nn.Conv2d(inp, inp // r, 1); self.fc2 = nn.Conv2d(inp // r, inp, 1)
        self.relu = nn.ReLU(inplace=True)
        self.eval()
    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        s = out.mean((2, 3), keepdim=True)
        s = torch.sigmoid(self.fc2(self.relu(self.fc1(s))))
        return self.relu(out * s + x)

def get_inputs():
    return [torch.randn(8, 256, 28, 28)]

def get_init_inputs():
    return [256, 128, 32, 16]
