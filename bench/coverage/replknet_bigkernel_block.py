import torch
import torch.nn as nn


def conv_bn(cin, cout, k, stride, padding, groups):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding, groups=groups, bias=False), nn.BatchNorm2d(cout))


class ReparamLargeKernelConv(nn.Module):
    def __init__(self, c, k, small_k):
        super().__init__()
        self.lkb_origin = conv_bn(c, c, k, 1, k // 2, c)
        self.small_conv = conv_bn(c, c, small_k, 1, small_k // 2, c)

    def forward(self, x):
        return self.lkb_origin(x) + self.small_conv(x)


class Model(nn.Module):
    """RepLKNet block before re-parameterisation (eval): BN pre-norm, 1x1 conv+BN+ReLU, a 31x31 depthwise conv+BN
    summed with a parallel 5x5 depthwise conv+BN, ReLU, 1x1 conv+BN, residual; then the ConvFFN
    (BN, 1x1 expand, GELU, 1x1), residual."""
    def __init__(self, c=128, k=31, small_k=5):
        super().__init__()
        self.prelkb_bn = nn.BatchNorm2d(c)
        self.pw1 = nn.Sequential(conv_bn(c, c, 1, 1, 0, 1), nn.ReLU())
        self.large_kernel = ReparamLargeKernelConv(c, k, small_k)
        self.lk_nonlinear = nn.ReLU()
        self.pw2 = conv_bn(c, c, 1, 1, 0, 1)
        self.ffn_bn = nn.BatchNorm2d(c)
        self.ffn_pw1 = conv_bn(c, 4 * c, 1, 1, 0, 1)
        self.ffn_act = nn.GELU()
        self.ffn_pw2 = conv_bn(4 * c, c, 1, 1, 0, 1)
        self.eval()

    def forward(self, x):
        out = self.pw2(self.lk_nonlinear(self.large_kernel(self.pw1(self.prelkb_bn(x)))))
        x = x + out
        return x + self.ffn_pw2(self.ffn_act(self.ffn_pw1(self.ffn_bn(x))))


def get_inputs():
    return [torch.randn(8, 128, 32, 32)]


def get_init_inputs():
    return [128, 31, 5]
