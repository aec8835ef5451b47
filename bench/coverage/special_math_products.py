import torch
import torch.nn as nn

class Model(nn.Module):
    """Rotated-box / geometry head math plus tensor products: angle from torch.atan2(sin, cos), torch.hypot, probit via torch.special.erfinv, expm1 / log1p / xlogy, sinc; a Kronecker-factored linear (torch.kron of two small factors), a block-diagonal multi-head projection from torch.block_diag, torch.tensordot over two dims, einsum with ellipsis, torch.cartesian_prod anchor offsets."""
    def __init__(self, d=32):
        super().__init__()
        self.head = nn.Linear(d, 6)
        self.A = nn.Parameter(torch.randn(4, 4) * 0.3)
        self.B = nn.Parameter(torch.randn(8, 8) * 0.3)
        self.blocks = nn.ParameterList(nn.Parameter(torch.randn(8, 8) * 0.3) for _ in range(4))
        self.T = nn.Parameter(torch.randn(4, 8, 16) * 0.1)

    def forward(self, x):
        o = self.head(x)
        ang = torch.atan2(o[:, 0], o[:, 1])
        r = torch.hypot(o[:, 2], o[:, 3])
        pr = torch.special.erfinv(torch.sigmoid(o[:, 4]) * 1.98 - 0.99)
        s = torch.expm1(o[:, 5].clamp(max=5)) + torch.log1p(r) + torch.xlogy(r, r + 1) + torch.sinc(ang)
        W = torch.kron(self.A, self.B)                             # 32 x 32
        h1 = x @ W
        h2 = x @ torch.block_diag(*self.blocks)
        h3 = torch.tensordot(x.view(-1, 4, 8), self.T, dims=([1, 2], [0, 1]))
        h4 = torch.einsum("...i,...i->...", h1, h2)
        off = torch.cartesian_prod(torch.arange(3.0, device=x.device), torch.arange(2.0, device=x.device))
        geo = torch.stack([ang, r, pr, s, h4], dim=1)
        return geo, h3 + off.sum(), off

def get_inputs():
    return [torch.randn(16, 32)]

def get_init_inputs():
    return [32]
