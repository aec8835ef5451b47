import torch
import torch.nn as nn

class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()
    def forward(self, x):
        return self.act(self.bn(self.conv(x)))

class Model(nn.Module):
    """YOLOv5 SPPF + top-down step: nearest upsample, concat with the lateral map."""
    def __init__(self, c=256, k=5):
        super().__init__()
        self.cv1 = Conv(c, c // 2); self.cv2 = Conv(c * 2, c)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)
        self.lat = Conv(c, c // 2)
        self.up = nn.Upsample(None, 2, 'nearest')
        self.c3 = Conv(c, c // 2, 3)
        self.eval()
    def forward(self, x, p4):
        x = self.cv1(x)
        y1 = self.m(x); y2 = self.m(y1)
        x = self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))
        x = self.up(self.lat(x))
        return self.c3(torch.cat([x, p4], 1))

def get_inputs():
    return [torch.randn(4, 256, 20, 20), torch.randn(4, 128, 40, 40)]

def get_init_inputs():
    return [256, 5]
