import torch
import torch.nn as nn

class Model(nn.Module):
    """GIN layer with edge_index (int64): messages x[src] summed into dst by scatter_add_, (1+eps)*x + agg, MLP with BN (eval), then graph sum readout over a batch vector."""
    def __init__(self, dim=64, num_graphs=8):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.BatchNorm1d(dim), nn.ReLU(), nn.Linear(dim, dim))
        self.num_graphs = num_graphs
        self.eval()
    def forward(self, x, edge_index, batch):
        src, dst = edge_index[0], edge_index[1]
        agg = torch.zeros_like(x).scatter_add_(0, dst.unsqueeze(-1).expand(-1, x.shape[1]), x[src])
        h = self.mlp((1 + self.eps) * x + agg)
        out = torch.zeros(self.num_graphs, h.shape[1], dtype=h.dtype, device=h.device)
        out = out.index_add(0, batch, h)
        return out

def get_inputs():
    n, e = 800, 4000
    return [torch.randn(n, 64), torch.randint(0, n, (2, e), dtype=torch.int64), torch.arange(n, dtype=torch.int64) // 100]

def get_init_inputs():
    return [64, 8]
