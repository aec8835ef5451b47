import torch
import torch.nn as nn

class Model(nn.Module):
    """Gilmer MPNN (QM9 style): edge network produces a per-edge (d x d) matrix from edge features, messages = bmm(W_e, h_src), aggregated with scatter_add_ using an index expanded to (E, d), GRUCell node update for 3 steps, then sum readout per graph with scatter_add over a batch vector."""
    def __init__(self, node_in=11, edge_in=4, d=32, steps=3, num_graphs=4):
        super().__init__()
        self.d, self.steps, self.num_graphs = d, steps, num_graphs
        self.lin0 = nn.Linear(node_in, d)
        self.edge_net = nn.Sequential(nn.Linear(edge_in, 64), nn.ReLU(), nn.Linear(64, d * d))
        self.gru = nn.GRUCell(d, d)
        self.out = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))

    def forward(self, x, edge_index, edge_attr, batch):
        h = torch.relu(self.lin0(x))
        src, dst = edge_index[0], edge_index[1]
        W = self.edge_net(edge_attr).view(-1, self.d, self.d)
        for _ in range(self.steps):
            msg = torch.bmm(W, h[src].unsqueeze(-1)).squeeze(-1)
            agg = torch.zeros_like(h).scatter_add_(0, dst.unsqueeze(-1).expand(-1, self.d), msg)
            h = self.gru(torch.relu(agg), h)
        g = torch.zeros(self.num_graphs, self.d, device=h.device).scatter_add_(0, batch.unsqueeze(-1).expand(-1, self.d), h)
        return self.out(g).squeeze(-1)

def get_inputs():
    N, E = 60, 200
    return [torch.randn(N, 11), torch.randint(0, N, (2, E)), torch.randn(E, 4), torch.arange(N) // 15]

def get_init_inputs():
    return [11, 4, 32, 3, 4]
