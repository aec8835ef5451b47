import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Mamba-style in_proj, split into x and gate z, causal depthwise conv1d (pad then slice), SiLU, gate, out_proj."""
    def __init__(self, d_model=256, expand=2, d_conv=4):
        super().__init__()
        d_inner = expand * d_model
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1, bias=True)
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        self.norm = nn.LayerNorm(d_model)
    def forward(self, hidden):
        L = hidden.shape[1]
        xz = self.in_proj(self.norm(hidden)).transpose(1, 2)
        x, z = xz.chunk(2, dim=1)
        x = F.silu(self.conv1d(x)[..., :L])
        y = x * F.silu(z)
        return hidden + self.out_proj(y.transpose(1, 2))

def get_inputs():
    return [torch.randn(4, 512, 256)]

def get_init_inputs():
    return [256, 2, 4]
