import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """CoAtNet MBConv (downsampling, pre-norm BN in eval): maxpool+1x1 shortcut, BN, 1x1 expand stride 2, GELU, dw3x3, SE with SiLU/sigmoid, 1x1 project; stochastic depth is identity in eval."""
    def __init__(self, cin=64, cout=96, exp=4, drop_path=0.1):
        super().__init__()
        mid = cin * exp
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.proj = nn.Conv2d(cin, cout, 1)
        self.pre_norm = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, mid, 1, stride=2, bias=False); self.bn1 = nn.BatchNorm2d(mid)
        self.dw = nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False); self.bn2 = nn.BatchNorm2d(mid)
        self.se_r = nn.Conv2d(mid, cin // 4, 1); self.se_e = nn.Conv2d(cin // 4, mid, 1)
        self.conv3 = nn.Conv2d(mid, cout, 1)
        self.drop_path = drop_path
        self.eval()
    def forward(self, x):
        sc = self.proj(self.pool(x))
        h = F.gelu(self.bn1(self.conv1(self.pre_norm(x))))
        h = F.gelu(self.bn2(self.dw(h)))
        s = torch.sigmoid(self.se_e(F.silu(self.se_r(F.adaptive_avg_pool2d(h, 1)))))
        h = self.conv3(h * s)
        if self.training and self.drop_path > 0:
            keep = torch.rand(h.shape[0], 1, 1, 1, device=h.device) >= self.drop_path
            h = h * keep / (1 - self.drop_path)
        return sc + h

def get_inputs():
    return [torch.randn(8, 64, 56, 56)]

def get_init_inputs():
    return [64, 96, 4, 0.1]
