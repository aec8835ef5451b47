"""RepVGG block in eval mode (before re-parameterisation, as timm ships it for training checkpoints): 3x3 conv+BN, 1x1 conv+BN and identity BN branches summed, ReLU; two blocks, the second with stride 2 (no identity)."""
import torch
import torch.nn as nn


def conv_bn(cin, cout, k, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout))


class RepVGGBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.dense = conv_bn(cin, cout, 3, stride)
        self.one = conv_bn(cin, cout, 1, stride)
        self.identity = nn.BatchNorm2d(cin) if cin == cout and stride == 1 else None
        self.act = nn.ReLU()

    def forward(self, x):
        y = self.dense(x) + self.one(x)
        if self.identity is not None:
            y = y + self.identity(x)
        return self.act(y)


class Model(nn.Module):
    def __init__(self, c=48):
        super().__init__()
        self.b1 = RepVGGBlock(c, c, 1)
        self.b2 = RepVGGBlock(c, 2 * c, 2)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                with torch.no_grad():
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.1, 0.1)
        self.eval()

    def forward(self, x):
        return self.b2(self.b1(x))


def get_inputs():
    return [torch.randn(4, 48, 32, 32)]


def get_init_inputs():
    return []
