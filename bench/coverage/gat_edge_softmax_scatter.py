import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Sparse GAT layer: per-edge scores, edge softmax by destination (scatter_reduce amax, exp, scatter_add sum), weighted message aggregation with index_add."""
    def __init__(self, in_dim=64, out_dim=16, heads=4):
        super().__init__()
        self.h, self.d = heads, out_dim
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.randn(1, heads, out_dim) * 0.1)
        self.att_dst = nn.Parameter(torch.randn(1, heads, out_dim) * 0.1)
        self.bias = nn.Parameter(torch.zeros(heads * out_dim))
    def forward(self, x, edge_index):
        N = x.shape[0]
        src, dst = edge_index
        h = self.lin(x).view(N, self.h, self.d)
        a_s = (h * self.att_src).sum(-1)
        a_d = (h * self.att_dst).sum(-1)
        e = F.leaky_relu(a_s[src] + a_d[dst], 0.2)
        idx = dst.unsqueeze(-1).expand_as(e)
        e_max = torch.full((N, self.h), float("-inf"), dtype=e.dtype, device=e.device).scatter_reduce(0, idx, e, reduce="amax", include_self=True)
        e = (e - e_max[dst]).exp()
        denom = torch.zeros(N, self.h, dtype=e.dtype, device=e.device).scatter_add(0, idx, e)
        alpha = e / (denom[dst] + 1e-16)
        msg = h[src] * alpha.unsqueeze(-1)
        out = torch.zeros_like(h).index_add_(0, dst, msg)
        return F.elu(out.reshape(N, -1) + self.bias)

def get_inputs():
    n = 1000
    ei = torch.randint(0, n, (2, 6000), dtype=torch.int64)
    loops = torch.arange(n, dtype=torch.int64).repeat(2, 1)
    return [torch.randn(n, 64), torch.cat([ei, loops], dim=1)]

def get_init_inputs():
    return [64, 16, 4]
