import torch
import torch.nn as nn
import torch.nn.functional as F

class InteractingLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.W_Q = nn.Parameter(torch.randn(d, d) * 0.05)
        self.W_K = nn.Parameter(torch.randn(d, d) * 0.05)
        self.W_V = nn.Parameter(torch.randn(d, d) * 0.05)
        self.W_R = nn.Parameter(torch.randn(d, d) * 0.05)
    def forward(self, x):
        q = torch.tensordot(x, self.W_Q, dims=([-1], [0]))
        k = torch.tensordot(x, self.W_K, dims=([-1], [0]))
        v = torch.tensordot(x, self.W_V, dims=([-1], [0]))
        q = torch.stack(torch.split(q, q.size(-1) // self.h, dim=2))
        k = torch.stack(torch.split(k, k.size(-1) // self.h, dim=2))
        v = torch.stack(torch.split(v, v.size(-1) // self.h, dim=2))
        att = F.softmax(torch.einsum("bnik,bnjk->bnij", q, k), dim=-1)
        res = torch.matmul(att, v)
        res = torch.cat(torch.split(res, 1, dim=0), dim=-1).squeeze(0)
        res = res + torch.tensordot(x, self.W_R, dims=([-1], [0]))
        return F.relu(res)

class Model(nn.Module):
    """AutoInt (DeepCTR style): per-field embeddings (sparse fields via a ModuleList, dense fields via per-field vectors scaled by value), 3 interacting layers written with tensordot and torch.stack(torch.split(...)) heads, flatten, logit, sigmoid."""
    def __init__(self, n_sparse=6, vocab=100, n_dense=4, d=16, heads=2, layers=3):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(vocab, d) for _ in range(n_sparse))
        self.dense_emb = nn.Parameter(torch.randn(n_dense, d) * 0.05)
        self.layers = nn.ModuleList(InteractingLayer(d, heads) for _ in range(layers))
        self.out = nn.Linear((n_sparse + n_dense) * d, 1)

    def forward(self, sparse, dense):
        e = [emb(sparse[:, i]) for i, emb in enumerate(self.embs)]
        x = torch.cat([torch.stack(e, dim=1), dense.unsqueeze(-1) * self.dense_emb], dim=1)
        for layer in self.layers:
            x = layer(x)
        return torch.sigmoid(self.out(torch.flatten(x, start_dim=1)))

def get_inputs():
    return [torch.randint(0, 100, (32, 6)), torch.rand(32, 4)]

def get_init_inputs():
    return [6, 100, 4, 16, 2, 3]
