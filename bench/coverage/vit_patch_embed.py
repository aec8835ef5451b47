"""ViT input stem: Conv2d patchify (16x16 stride 16), flatten + transpose, a class token expanded over the batch and cat'ed, learned position embedding added, LayerNorm."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, img=224, patch=16, d=384):
        super().__init__()
        n = (img // patch) ** 2
        self.proj = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        return self.norm(x + self.pos)


def get_inputs():
    return [torch.randn(16, 3, 224, 224)]


def get_init_inputs():
    return []
