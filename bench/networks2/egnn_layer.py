"""E(n)-equivariant GNN layer (EGNN, Satorras et al. 2021) on a batch of molecules as one graph:
edge MLP on (h_i, h_j, |x_i - x_j|^2, edge_attr), attention gate, coordinate update by
mean-aggregated (x_i - x_j) * phi_x(m_ij) (index_add_ / a count), node MLP on summed messages with a
residual. Edges are given as a long (2, E) tensor, as PyG users pass edge_index."""
import torch
import torch.nn as nn


def unsorted_segment_sum(data, segment_ids, num_segments):
    result = data.new_zeros((num_segments, data.size(1)))
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result.scatter_add_(0, segment_ids, data)
    return result


def unsorted_segment_mean(data, segment_ids, num_segments):
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result = data.new_zeros((num_segments, data.size(1)))
    count = data.new_zeros((num_segments, data.size(1)))
    result.scatter_add_(0, segment_ids, data)
    count.scatter_add_(0, segment_ids, torch.ones_like(data))
    return result / count.clamp(min=1)


class Model(nn.Module):
    def __init__(self, hidden_nf=128, edges_in_d=4, n_nodes=2048):
        super().__init__()
        self.n_nodes = n_nodes
        act = nn.SiLU()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * hidden_nf + 1 + edges_in_d, hidden_nf), act,
                                      nn.Linear(hidden_nf, hidden_nf), act)
        self.node_mlp = nn.Sequential(nn.Linear(2 * hidden_nf, hidden_nf), act, nn.Linear(hidden_nf, hidden_nf))
        layer = nn.Linear(hidden_nf, 1, bias=False)
        nn.init.xavier_uniform_(layer.weight, gain=0.001)
        self.coord_mlp = nn.Sequential(nn.Linear(hidden_nf, hidden_nf), act, layer)
        self.att_mlp = nn.Sequential(nn.Linear(hidden_nf, 1), nn.Sigmoid())

    def forward(self, h, coord, edge_index, edge_attr):
        row, col = edge_index[0], edge_index[1]
        coord_diff = coord[row] - coord[col]
        radial = torch.sum(coord_diff ** 2, 1).unsqueeze(1)
        # normalised differences, as EGNN_Sparse with norm_diff
        coord_diff = coord_diff / (torch.sqrt(radial).detach() + 1.0)
        edge_feat = self.edge_mlp(torch.cat([h[row], h[col], radial, edge_attr], dim=1))
        edge_feat = edge_feat * self.att_mlp(edge_feat)
        trans = coord_diff * self.coord_mlp(edge_feat)
        coord = coord + unsorted_segment_mean(trans, row, num_segments=coord.size(0))
        agg = unsorted_segment_sum(edge_feat, row, num_segments=h.size(0))
        h = h + self.node_mlp(torch.cat([h, agg], dim=1))
        return h, coord


num_graphs = 64
nodes_per_graph = 32
n_nodes = num_graphs * nodes_per_graph
hidden_nf = 128
edges_in_d = 4


def _fully_connected_edges():
    i, j = torch.meshgrid(torch.arange(nodes_per_graph), torch.arange(nodes_per_graph), indexing="ij")
    keep = i != j
    i, j = i[keep], j[keep]
    offs = (torch.arange(num_graphs) * nodes_per_graph).repeat_interleave(i.numel())
    return torch.stack([i.repeat(num_graphs) + offs, j.repeat(num_graphs) + offs])


def get_inputs():
    ei = _fully_connected_edges()
    return [torch.randn(n_nodes, hidden_nf), torch.randn(n_nodes, 3), ei, torch.randn(ei.shape[1], edges_in_d)]


def get_init_inputs():
    return [hidden_nf, edges_in_d, n_nodes]
