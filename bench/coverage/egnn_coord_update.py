import torch
import torch.nn as nn


def unsorted_segment_sum(data, segment_ids, num_segments):
    result = data.new_full((num_segments, data.size(1)), 0)
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result.scatter_add_(0, segment_ids, data)
    return result


def unsorted_segment_mean(data, segment_ids, num_segments):
    result = data.new_full((num_segments, data.size(1)), 0)
    count = data.new_full((num_segments, data.size(1)), 0)
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result.scatter_add_(0, segment_ids, data)
    count.scatter_add_(0, segment_ids, torch.ones_like(data))
    return result / count.clamp(min=1)


class E_GCL(nn.Module):
    def __init__(self, d, edge_d=1):
        super().__init__()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * d + 1 + edge_d, d), nn.SiLU(), nn.Linear(d, d), nn.SiLU())
        self.node_mlp = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU(), nn.Linear(d, d))
        last = nn.Linear(d, 1, bias=False)
        torch.nn.init.xavier_uniform_(last.weight, gain=0.001)
        self.coord_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), last)
        self.att_mlp = nn.Sequential(nn.Linear(d, 1), nn.Sigmoid())

    def forward(self, h, edge_index, coord, edge_attr):
        row, col = edge_index
        coord_diff = coord[row] - coord[col]
        radial = torch.sum(coord_diff ** 2, 1).unsqueeze(1)
        norm = torch.sqrt(radial).detach() + 1.0
        coord_diff = coord_diff / norm
        m = self.edge_mlp(torch.cat([h[row], h[col], radial, edge_attr], dim=1))
        m = m * self.att_mlp(m)
        trans = coord_diff * torch.tanh(self.coord_mlp(m))
        coord = coord + unsorted_segment_mean(trans, row, coord.size(0))
        agg = unsorted_segment_sum(m, row, h.size(0))
        h = h + self.node_mlp(torch.cat([h, agg], dim=1))
        return h, coord


class Model(nn.Module):
    """E(n)-equivariant GNN (Satorras et al., reference code): 3 E_GCL layers over a fixed edge list (int64 row/col),
    radial distances, attention-gated edge messages, equivariant coordinate update by tanh-bounded coord MLP,
    unsorted_segment_sum / mean via new_full + scatter_add_ with an expanded index; returns features and coords."""
    def __init__(self, in_nf=16, d=128, n_layers=3):
        super().__init__()
        self.embedding_in = nn.Linear(in_nf, d)
        self.layers = nn.ModuleList([E_GCL(d) for _ in range(n_layers)])
        self.embedding_out = nn.Linear(d, in_nf)

    def forward(self, h, x, edge_index, edge_attr):
        h = self.embedding_in(h)
        for layer in self.layers:
            h, x = layer(h, edge_index, x, edge_attr)
        return self.embedding_out(h), x


def get_inputs():
    n_graphs, n = 32, 20
    rows, cols = [], []
    for g in range(n_graphs):
        idx = torch.arange(n) + g * n
        r, c = torch.meshgrid(idx, idx, indexing="ij")
        keep = r != c
        rows.append(r[keep]); cols.append(c[keep])
    edge_index = torch.stack([torch.cat(rows), torch.cat(cols)])
    N = n_graphs * n
    return [torch.randn(N, 16), torch.randn(N, 3), edge_index, torch.rand(edge_index.shape[1], 1)]


def get_init_inputs():
    return [16, 128, 3]
