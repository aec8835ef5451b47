import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class ShiftedSoftplus(nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = math.log(2.0)

    def forward(self, x):
        return F.softplus(x) - self.shift


class GaussianSmearing(nn.Module):
    def __init__(self, start=0.0, stop=5.0, num_gaussians=50):
        super().__init__()
        offset = torch.linspace(start, stop, num_gaussians)
        self.coeff = -0.5 / (offset[1] - offset[0]).item() ** 2
        self.register_buffer("offset", offset)

    def forward(self, dist):
        dist = dist.view(-1, 1) - self.offset.view(1, -1)
        return torch.exp(self.coeff * torch.pow(dist, 2))


class InteractionBlock(nn.Module):
    def __init__(self, hidden, num_gaussians, num_filters, cutoff):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(num_gaussians, num_filters), ShiftedSoftplus(), nn.Linear(num_filters, num_filters))
        self.lin1 = nn.Linear(hidden, num_filters, bias=False)
        self.lin2 = nn.Linear(num_filters, hidden)
        self.act = ShiftedSoftplus()
        self.lin = nn.Linear(hidden, hidden)
        self.cutoff = cutoff

    def forward(self, x, edge_index, edge_weight, edge_attr):
        C = 0.5 * (torch.cos(edge_weight * math.pi / self.cutoff) + 1.0)
        W = self.mlp(edge_attr) * C.view(-1, 1)
        j, i = edge_index
        msg = self.lin1(x)[j] * W
        out = torch.zeros(x.size(0), msg.size(1), dtype=msg.dtype, device=msg.device).index_add_(0, i, msg)
        return self.lin(self.act(self.lin2(out)))


class Model(nn.Module):
    """SchNet (PyG-style) for molecules: atom-type nn.Embedding, edge distances from positions
    (pos[row] - pos[col]).norm(dim=-1), Gaussian RBF expansion against a linspace buffer, cosine cutoff,
    continuous-filter convolution (filter MLP times gathered neighbour features, index_add_ to targets),
    shifted softplus, 3 interactions, per-atom readout MLP, per-molecule sum via index_add_ over a batch vector."""
    def __init__(self, hidden=128, num_filters=128, num_gaussians=50, cutoff=5.0, n_interactions=3, n_mols=32):
        super().__init__()
        self.n_mols = n_mols
        self.embedding = nn.Embedding(100, hidden, padding_idx=0)
        self.distance_expansion = GaussianSmearing(0.0, cutoff, num_gaussians)
        self.interactions = nn.ModuleList([InteractionBlock(hidden, num_gaussians, num_filters, cutoff) for _ in range(n_interactions)])
        self.lin1 = nn.Linear(hidden, hidden // 2)
        self.act = ShiftedSoftplus()
        self.lin2 = nn.Linear(hidden // 2, 1)

    def forward(self, z, pos, edge_index, batch):
        h = self.embedding(z)
        row, col = edge_index
        edge_weight = (pos[row] - pos[col]).norm(dim=-1)
        edge_attr = self.distance_expansion(edge_weight)
        for interaction in self.interactions:
            h = h + interaction(h, edge_index, edge_weight, edge_attr)
        h = self.lin2(self.act(self.lin1(h)))
        return torch.zeros(self.n_mols, 1, dtype=h.dtype, device=h.device).index_add_(0, batch, h)


def get_inputs():
    n_mols, n = 32, 18
    rows, cols = [], []
    for g in range(n_mols):
        idx = torch.arange(n) + g * n
        r, c = torch.meshgrid(idx, idx, indexing="ij")
        keep = r != c
        rows.append(r[keep]); cols.append(c[keep])
    N = n_mols * n
    return [torch.randint(1, 10, (N,)), torch.randn(N, 3) * 1.5, torch.stack([torch.cat(rows), torch.cat(cols)]),
            torch.arange(n_mols).repeat_interleave(n)]


def get_init_inputs():
    return [128, 128, 50, 5.0, 3, 32]
