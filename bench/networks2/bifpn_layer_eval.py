"""One EfficientDet BiFPN layer (P3-P7, eval mode): fast normalized fusion (relu'd weights over
their sum + eps), nearest 2x upsampling top-down, 3x3/2 max-pool (same padding) bottom-up, each
node a swish then depthwise-separable conv + BN."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SeparableConvBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.depthwise_conv = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.pointwise_conv = nn.Conv2d(c, c, 1)
        self.bn = nn.BatchNorm2d(c, momentum=0.01, eps=1e-3)

    def forward(self, x):
        return self.bn(self.pointwise_conv(self.depthwise_conv(x)))


class MaxPool2dStaticSamePadding(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, 2)

    def forward(self, x):
        h, w = x.shape[-2:]
        extra_v = max(0, (-(-h // 2) - 1) * 2 - h + 3)
        extra_h = max(0, (-(-w // 2) - 1) * 2 - w + 3)
        left, top = extra_h // 2, extra_v // 2
        x = F.pad(x, [left, extra_h - left, top, extra_v - top])
        return self.pool(x)


def swish(x):
    return x * torch.sigmoid(x)


class Model(nn.Module):
    def __init__(self, num_channels=64, epsilon=1e-4):
        super().__init__()
        self.epsilon = epsilon
        c = num_channels
        self.conv6_up, self.conv5_up, self.conv4_up, self.conv3_up = (SeparableConvBlock(c) for _ in range(4))
        self.conv4_down, self.conv5_down, self.conv6_down, self.conv7_down = (SeparableConvBlock(c) for _ in range(4))
        self.p6_downsample, self.p5_downsample, self.p4_downsample, self.p7_downsample = (
            MaxPool2dStaticSamePadding() for _ in range(4))
        self.p6_w1 = nn.Parameter(torch.rand(2) + 0.5)
        self.p5_w1 = nn.Parameter(torch.rand(2) + 0.5)
        self.p4_w1 = nn.Parameter(torch.rand(2) + 0.5)
        self.p3_w1 = nn.Parameter(torch.rand(2) + 0.5)
        self.p4_w2 = nn.Parameter(torch.rand(3) + 0.5)
        self.p5_w2 = nn.Parameter(torch.rand(3) + 0.5)
        self.p6_w2 = nn.Parameter(torch.rand(3) + 0.5)
        self.p7_w2 = nn.Parameter(torch.rand(2) + 0.5)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, p3, p4, p5, p6, p7):
        up = lambda t: F.interpolate(t, scale_factor=2.0, mode="nearest")  # noqa: E731
        w = F.relu(self.p6_w1)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p6_up = self.conv6_up(swish(w[0] * p6 + w[1] * up(p7)))
        w = F.relu(self.p5_w1)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p5_up = self.conv5_up(swish(w[0] * p5 + w[1] * up(p6_up)))
        w = F.relu(self.p4_w1)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p4_up = self.conv4_up(swish(w[0] * p4 + w[1] * up(p5_up)))
        w = F.relu(self.p3_w1)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p3_out = self.conv3_up(swish(w[0] * p3 + w[1] * up(p4_up)))
        w = F.relu(self.p4_w2)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p4_out = self.conv4_down(swish(w[0] * p4 + w[1] * p4_up + w[2] * self.p4_downsample(p3_out)))
        w = F.relu(self.p5_w2)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p5_out = self.conv5_down(swish(w[0] * p5 + w[1] * p5_up + w[2] * self.p5_downsample(p4_out)))
        w = F.relu(self.p6_w2)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p6_out = self.conv6_down(swish(w[0] * p6 + w[1] * p6_up + w[2] * self.p6_downsample(p5_out)))
        w = F.relu(self.p7_w2)
        w = w / (torch.sum(w, dim=0) + self.epsilon)
        p7_out = self.conv7_down(swish(w[0] * p7 + w[1] * self.p7_downsample(p6_out)))
        return p3_out, p4_out, p5_out, p6_out, p7_out


batch_size = 4
num_channels = 64
base = 96  # P3 side for a 768 px image


def get_inputs():
    return [torch.randn(batch_size, num_channels, base >> i, base >> i) for i in range(5)]


def get_init_inputs():
    return [num_channels]
