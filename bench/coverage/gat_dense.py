"""Graph attention layer (pyGAT) on a dense adjacency: Linear, per-head scores a1.Wh_i + a2.Wh_j, LeakyReLU, mask non-edges with torch.where(adj > 0, e, -9e15), softmax, aggregate, ELU; 4 heads concatenated."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_in=128, d_out=64, heads=4):
        super().__init__()
        self.heads, self.d_out = heads, d_out
        self.W = nn.Linear(d_in, heads * d_out, bias=False)
        self.a_src = nn.Parameter(torch.randn(heads, d_out) * 0.1)
        self.a_dst = nn.Parameter(torch.randn(heads, d_out) * 0.1)

    def forward(self, x, adj):
        n = x.shape[0]
        wh = self.W(x).view(n, self.heads, self.d_out)
        e_src = (wh * self.a_src).sum(-1)
        e_dst = (wh * self.a_dst).sum(-1)
        e = F.leaky_relu(e_src.t().unsqueeze(2) + e_dst.t().unsqueeze(1), 0.2)
        e = torch.where(adj.unsqueeze(0) > 0, e, torch.full_like(e, -9e15))
        att = F.softmax(e, dim=-1)
        out = torch.bmm(att, wh.transpose(0, 1))
        return F.elu(out.transpose(0, 1).reshape(n, self.heads * self.d_out))


def get_inputs():
    n = 1024
    adj = (torch.rand(n, n) < 0.01).float()
    adj = adj + torch.eye(n)
    return [torch.randn(n, 128), adj]


def get_init_inputs():
    return []
