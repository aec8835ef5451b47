"""DLRM: bottom MLP on dense features, one nn.EmbeddingBag (sum) per sparse feature, pairwise dot products via bmm, strict upper triangle via triu_indices, cat, top MLP."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_dense=13, tables=(10000, 20000, 5000, 30000, 8000, 1000, 40000, 2000), d=64):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(n_dense, 256), nn.ReLU(), nn.Linear(256, d), nn.ReLU())
        self.embs = nn.ModuleList([nn.EmbeddingBag(n, d, mode="sum") for n in tables])
        f = len(tables) + 1
        self.register_buffer("li", torch.triu_indices(f, f, offset=1)[0], persistent=False)
        self.register_buffer("lj", torch.triu_indices(f, f, offset=1)[1], persistent=False)
        self.top = nn.Sequential(nn.Linear(d + f * (f - 1) // 2, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense, sparse):
        x = self.bot(dense)
        ly = [emb(sparse[:, i, :]) for i, emb in enumerate(self.embs)]
        t = torch.stack([x] + ly, dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        zflat = z[:, self.li, self.lj]
        return torch.sigmoid(self.top(torch.cat([x, zflat], dim=1)))


def get_inputs():
    return [torch.randn(32, 13), torch.randint(0, 1000, (32, 8, 4))]


def get_init_inputs():
    return []
