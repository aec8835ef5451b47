import torch
import torch.nn as nn
import torch.nn.functional as F


class SqueezeExcite(nn.Module):
    def __init__(self, c, rd):
        super().__init__()
        self.conv_reduce = nn.Conv2d(c, rd, 1)
        self.conv_expand = nn.Conv2d(rd, c, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        s = self.conv_expand(F.silu(self.conv_reduce(s)))
        return x * s.sigmoid()


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep = 1 - drop_prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
    return x * mask.div_(keep)


class FusedMBConv(nn.Module):
    def __init__(self, cin, cout, stride, expand, se_ratio, drop_path_rate):
        super().__init__()
        mid = cin * expand
        self.conv_exp = nn.Conv2d(cin, mid, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.se = SqueezeExcite(mid, max(1, int(cin * se_ratio))) if se_ratio else nn.Identity()
        self.conv_pwl = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.has_skip = stride == 1 and cin == cout
        self.drop_path_rate = drop_path_rate

    def forward(self, x):
        shortcut = x
        x = F.silu(self.bn1(self.conv_exp(x)))
        x = self.conv_pwl(self.se(x))
        x = self.bn2(x)
        if self.has_skip:
            x = drop_path(x, self.drop_path_rate, self.training) + shortcut
        return x


class Model(nn.Module):
    """EfficientNetV2 stage (timm, eval): Fused-MBConv (3x3 expand conv, BN, SiLU, optional SE, 1x1 project, BN)
    with drop_path as a no-op in eval; first block stride 2 without SE, then two with SE and residual; then an
    EfficientNetV2 head (1x1 conv, BN, SiLU, global pool, flatten, Linear)."""
    def __init__(self, cin=48, c=64, n_classes=100):
        super().__init__()
        self.blocks = nn.Sequential(
            FusedMBConv(cin, c, 2, 4, 0.0, 0.0),
            FusedMBConv(c, c, 1, 4, 0.25, 0.1),
            FusedMBConv(c, c, 1, 4, 0.25, 0.2),
        )
        self.conv_head = nn.Conv2d(c, 320, 1, bias=False)
        self.bn_head = nn.BatchNorm2d(320)
        self.classifier = nn.Linear(320, n_classes)
        self.eval()

    def forward(self, x):
        x = F.silu(self.bn_head(self.conv_head(self.blocks(x))))
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def get_inputs():
    return [torch.randn(16, 48, 64, 64)]


def get_init_inputs():
    return [48, 64, 100]
