import torch
import torch.nn as nn

def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

class Model(nn.Module):
    def __init__(self, d=256, h=4):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate='tanh'), nn.Linear(4 * d, d))
        self.adaLN = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
    def forward(self, x, c):
        sm, scm, gm, sp, scp, gp = self.adaLN(c).chunk(6, dim=1)
        h = modulate(self.norm1(x), sm, scm)
        x = x + gm.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
        x = x + gp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), sp, scp))
        return x

def get_inputs():
    return [torch.randn(8, 256, 256), torch.randn(8, 256)]

def get_init_inputs():
    return [256, 4]
