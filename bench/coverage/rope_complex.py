"""Rotary embedding Meta-LLaMA style: freqs_cis via torch.polar, q/k viewed as complex, multiplied, viewed back as real."""
import torch
import torch.nn as nn


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end).float()
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


class Model(nn.Module):
    def __init__(self, dim=512, heads=8, max_len=256):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(self.hd, max_len), persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.hd)
        k = self.wk(x).view(b, t, self.heads, self.hd)
        fc = self.freqs_cis[:t].view(1, t, 1, self.hd // 2)
        q_ = torch.view_as_complex(q.float().reshape(b, t, self.heads, -1, 2))
        k_ = torch.view_as_complex(k.float().reshape(b, t, self.heads, -1, 2))
        q = torch.view_as_real(q_ * fc).flatten(3)
        k = torch.view_as_real(k_ * fc).flatten(3)
        return (q.transpose(1, 2) @ k.transpose(1, 2).transpose(-2, -1)).softmax(-1)


def get_inputs():
    return [torch.randn(8, 256, 512)]


def get_init_inputs():
    return []
