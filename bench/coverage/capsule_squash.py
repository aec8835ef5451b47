import torch
import torch.nn as nn

def squash(s, dim=-1, eps=1e-8):
    sq = (s ** 2).sum(dim=dim, keepdim=True)
    return sq / (1 + sq) * s / torch.sqrt(sq + eps)

class Model(nn.Module):
    """Primary capsules + 3 routing iterations to digit capsules."""
    def __init__(self, in_caps=1152, in_dim=8, out_caps=10, out_dim=16, iters=3):
        super().__init__()
        self.W = nn.Parameter(0.01 * torch.randn(1, in_caps, out_caps, out_dim, in_dim))
        self.iters = iters
    def forward(self, u):
        B = u.size(0)
        u = squash(u)
        u_hat = torch.matmul(self.W, u[:, :, None, :, None]).squeeze(-1)   # B,in,out,od
        b = torch.zeros(B, u_hat.size(1), u_hat.size(2), device=u.device)
        for i in range(self.iters):
            c = torch.softmax(b, dim=2)
            s = (c.unsqueeze(-1) * u_hat).sum(dim=1)
            v = squash(s)
            if i < self.iters - 1:
                b = b + (u_hat * v.unsqueeze(1)).sum(-1)
        return v.norm(dim=-1)

def get_inputs():
    return [torch.randn(8, 1152, 8)]

def get_init_inputs():
    return [1152, 8, 10, 16, 3]
