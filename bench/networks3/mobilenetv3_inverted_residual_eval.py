"""MobileNetV3-Large inverted residual in eval mode (torchvision.models.mobilenetv3): 1x1 expansion
conv + BN + Hardswish, 3x3 depthwise conv + BN + Hardswish, Squeeze-Excitation (average pool, 1x1
conv, ReLU, 1x1 conv, Hardsigmoid, scale), 1x1 projection conv + BN, the residual."""
import torch
import torch.nn as nn


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class SqueezeExcitation(nn.Module):
    def __init__(self, input_channels, squeeze_channels):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, input):
        scale = self.avgpool(input)
        scale = self.fc1(scale)
        scale = self.activation(scale)
        scale = self.fc2(scale)
        return self.scale_activation(scale) * input


def conv_bn_act(cin, cout, kernel_size, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, kernel_size, padding=(kernel_size - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
    if act:
        layers.append(nn.Hardswish(inplace=True))
    return nn.Sequential(*layers)


class Model(nn.Module):
    def __init__(self, input_channels=112, kernel=3, expanded_channels=672, out_channels=112):
        super().__init__()
        self.use_res_connect = input_channels == out_channels
        self.block = nn.Sequential(
            conv_bn_act(input_channels, expanded_channels, 1),
            conv_bn_act(expanded_channels, expanded_channels, kernel, groups=expanded_channels),
            SqueezeExcitation(expanded_channels, _make_divisible(expanded_channels // 4, 8)),
            conv_bn_act(expanded_channels, out_channels, 1, act=False),
        )
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, input):
        result = self.block(input)
        if self.use_res_connect:
            result += input
        return result


batch_size = 32
channels = 112
H = W = 28  # stage of 112 channels at a 448 px input


def get_inputs():
    return [torch.randn(batch_size, channels, H, W)]


def get_init_inputs():
    return [channels, 3, 672, channels]
