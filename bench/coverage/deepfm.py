"""DeepFM: per-field nn.Embedding on int64 ids (offsets into one table), FM second-order term ((sum e)^2 - sum e^2)/2, first-order weights, deep MLP, sigmoid."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, field_dims=(1000, 500, 2000, 300, 800, 100, 5000, 50, 700, 1500), d=16):
        super().__init__()
        n = sum(field_dims)
        self.emb = nn.Embedding(n, d)
        self.lin = nn.Embedding(n, 1)
        self.bias = nn.Parameter(torch.zeros(1))
        offs = torch.tensor((0, *torch.cumsum(torch.tensor(field_dims), 0)[:-1].tolist()), dtype=torch.long)
        self.register_buffer("offsets", offs, persistent=False)
        f = len(field_dims)
        self.mlp = nn.Sequential(nn.Linear(f * d, 400), nn.BatchNorm1d(400), nn.ReLU(), nn.Linear(400, 400), nn.BatchNorm1d(400), nn.ReLU(), nn.Linear(400, 1))

    def forward(self, x):
        x = x + self.offsets.unsqueeze(0)
        e = self.emb(x)
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1, keepdim=True)
        first = self.lin(x).sum(1) + self.bias
        deep = self.mlp(e.flatten(1))
        return torch.sigmoid(first + fm + deep).squeeze(1)


def get_inputs():
    return [torch.randint(0, 50, (32, 10))]


def get_init_inputs():
    return []
