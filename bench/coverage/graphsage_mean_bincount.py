import torch
import torch.nn as nn
import torch.nn.functional as F

class SAGEConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.lin_l = nn.Linear(cin, cout)
        self.lin_r = nn.Linear(cin, cout, bias=False)
    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.bincount(dst, minlength=x.size(0)).clamp(min=1).to(x.dtype)
        agg = agg / deg.unsqueeze(-1)
        out = self.lin_l(agg) + self.lin_r(x)
        return F.normalize(out, p=2.0, dim=-1)

class Model(nn.Module):
    """GraphSAGE mean aggregation on an edge_index (2, E): neighbour features summed with index_add_, degrees from torch.bincount(minlength), root weight, L2 normalisation; 2 layers, then global mean pool per graph with a batch vector via index_add_ / bincount, classifier."""
    def __init__(self, cin=16, hid=64, ncls=4, num_graphs=4):
        super().__init__()
        self.num_graphs = num_graphs
        self.conv1 = SAGEConv(cin, hid)
        self.conv2 = SAGEConv(hid, hid)
        self.cls = nn.Linear(hid, ncls)
    def forward(self, x, edge_index, batch):
        x = F.relu(self.conv1(x, edge_index))
        x = F.relu(self.conv2(x, edge_index))
        pooled = x.new_zeros(self.num_graphs, x.size(1)).index_add_(0, batch, x)
        counts = torch.bincount(batch, minlength=self.num_graphs).clamp(min=1).unsqueeze(-1)
        return self.cls(pooled / counts)

def get_inputs():
    N, E = 120, 600
    return [torch.randn(N, 16), torch.randint(0, N, (2, E)), torch.arange(N) // 30]

def get_init_inputs():
    return [16, 64, 4, 4]
