"""ConvNeXt V2 block (facebookresearch/ConvNeXt-V2, models/convnextv2.py): depthwise 7x7 conv,
channels-last LayerNorm through permutes, pointwise Linear to 4x, GELU, Global Response
Normalization (L2 norm over H, W divided by its channel mean), pointwise Linear back, residual."""
import torch
import torch.nn as nn


class GRN(nn.Module):
    def __init__(self, dim):
        super().__init__()
        # zeros in the paper's init; a trained network has learned values
        self.gamma = nn.Parameter(torch.randn(1, 1, 1, dim) * 0.1)
        self.beta = nn.Parameter(torch.randn(1, 1, 1, dim) * 0.1)

    def forward(self, x):
        Gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        Nx = Gx / (Gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * Nx) + self.beta + x


class Model(nn.Module):
    def __init__(self, dim=192):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.grn = GRN(4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.drop_path = nn.Identity()

    def forward(self, x):
        input = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.grn(x)
        x = self.pwconv2(x)
        x = x.permute(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
        return input + self.drop_path(x)


batch_size = 32
dim = 192  # ConvNeXt V2-T, stage 2
H = W = 28


def get_inputs():
    return [torch.randn(batch_size, dim, H, W)]


def get_init_inputs():
    return [dim]
