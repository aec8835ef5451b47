"""ConvLSTM cell: cat(x, h), one 3x3 conv to 4 gates, split, sigmoid/tanh, new c and h; returns (h_next, c_next)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin=32, ch=64, k=3):
        super().__init__()
        self.conv = nn.Conv2d(cin + ch, 4 * ch, k, padding=k // 2)

    def forward(self, x, h, c):
        i, f, o, g = torch.split(self.conv(torch.cat([x, h], dim=1)), h.shape[1], dim=1)
        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_next = torch.sigmoid(o) * torch.tanh(c_next)
        return h_next, c_next


def get_inputs():
    return [torch.randn(8, 32, 64, 64), torch.randn(8, 64, 64, 64), torch.randn(8, 64, 64, 64)]


def get_init_inputs():
    return []
