"""GATv2 (Brody et al.) over a fixed edge list buffer with self-loops: e_ij = a^T LeakyReLU(W_s x_j + W_t x_i) per head, softmax over each node's incoming edges via scatter_reduce('amax') subtraction, exp, index_add_ of the denominators, gather back by dst, weighted messages index_add_'ed, heads concatenated, ELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n=150, din=64, dout=32, heads=4, fanin=6):
        super().__init__()
        self.h, self.d = heads, dout
        g = torch.Generator().manual_seed(0)
        src = torch.randint(0, n, (n * fanin,), generator=g)
        dst = torch.arange(n).repeat_interleave(fanin)
        loops = torch.arange(n)
        self.register_buffer("edge_index", torch.stack([torch.cat([src, loops]), torch.cat([dst, loops])]))
        self.ws = nn.Linear(din, heads * dout)
        self.wt = nn.Linear(din, heads * dout)
        self.att = nn.Parameter(torch.randn(1, heads, dout) * 0.1)
        self.bias = nn.Parameter(torch.zeros(heads * dout))

    def forward(self, x):
        N = x.shape[0]
        src, dst = self.edge_index
        xs = self.ws(x).view(N, self.h, self.d)
        xt = self.wt(x).view(N, self.h, self.d)
        e = (F.leaky_relu(xs[src] + xt[dst], 0.2) * self.att).sum(-1)  # E, H
        idx = dst[:, None].expand(-1, self.h)
        emax = torch.full((N, self.h), float("-inf"), device=x.device).scatter_reduce(0, idx, e, "amax", include_self=True)
        w = torch.exp(e - emax[dst])
        den = torch.zeros(N, self.h, device=x.device).index_add_(0, dst, w)
        alpha = w / den[dst]
        out = torch.zeros(N, self.h, self.d, device=x.device).index_add_(0, dst, alpha[..., None] * xs[src])
        return F.elu(out.reshape(N, -1) + self.bias)


def get_inputs():
    return [torch.randn(150, 64)]


def get_init_inputs():
    return []
