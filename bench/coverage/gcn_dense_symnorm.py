import torch
import torch.nn as nn

class Model(nn.Module):
    """Two-layer dense GCN: A + I, D^-1/2 (A+I) D^-1/2 with inf->0 guard, then H' = relu(A_hat H W)."""
    def __init__(self, in_dim=64, hid=128, out_dim=32):
        super().__init__()
        self.w1 = nn.Linear(in_dim, hid)
        self.w2 = nn.Linear(hid, out_dim)
    def normalize(self, adj):
        n = adj.shape[-1]
        adj = adj + torch.eye(n, device=adj.device, dtype=adj.dtype)
        deg = adj.sum(dim=-1)
        d_inv_sqrt = deg.pow(-0.5)
        d_inv_sqrt = d_inv_sqrt.masked_fill(torch.isinf(d_inv_sqrt), 0.0)
        return d_inv_sqrt.unsqueeze(-1) * adj * d_inv_sqrt.unsqueeze(-2)
    def forward(self, x, adj):
        a = self.normalize(adj)
        h = torch.relu(torch.bmm(a, self.w1(x)))
        return torch.bmm(a, self.w2(h)).log_softmax(dim=-1)

def get_inputs():
    adj = (torch.rand(8, 200, 200) > 0.95).float()
    adj = ((adj + adj.transpose(1, 2)) > 0).float()
    return [torch.randn(8, 200, 64), adj]

def get_init_inputs():
    return [64, 128, 32]
