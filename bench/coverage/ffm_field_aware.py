"""Field-aware factorization machine (FFM): one embedding table per field holding a vector for every other field (Embedding(n, F*k) viewed as F x k), pairwise <v_{i,f_j}, v_{j,f_i}> for i<j from triu_indices-indexed gathers, plus first-order bias from an offset-shifted shared table, sigmoid."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, field_sizes=(100, 50, 200, 30, 80), k=8):
        super().__init__()
        self.F, self.k = len(field_sizes), k
        total = sum(field_sizes)
        self.register_buffer("offsets", torch.tensor([0] + list(field_sizes[:-1])).cumsum(0))
        self.emb = nn.Embedding(total, self.F * k)
        self.linear = nn.Embedding(total, 1)
        self.bias = nn.Parameter(torch.zeros(1))
        i, j = torch.triu_indices(self.F, self.F, offset=1)
        self.register_buffer("ii", i)
        self.register_buffer("jj", j)

    def forward(self, x):  # x: (B, F) int64 per-field ids
        idx = x + self.offsets[None]
        V = self.emb(idx).view(x.shape[0], self.F, self.F, self.k)  # B, field i, target field, k
        vij = V[:, self.ii, self.jj]  # v_{i, f_j}
        vji = V[:, self.jj, self.ii]  # v_{j, f_i}
        inter = (vij * vji).sum(-1).sum(-1)
        lin = self.linear(idx).squeeze(-1).sum(-1) + self.bias
        return torch.sigmoid(lin + inter)


def get_inputs():
    sizes = (100, 50, 200, 30, 80)
    return [torch.stack([torch.randint(0, s, (32,)) for s in sizes], dim=1)]


def get_init_inputs():
    return []
