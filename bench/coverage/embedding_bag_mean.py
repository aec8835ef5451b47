import torch
import torch.nn as nn

class Model(nn.Module):
    """YouTube-DNN style user tower: watch-history ids pooled by nn.EmbeddingBag(mode='mean') (fixed-length bags), a per-sample weighted 'sum' bag for search tokens, concat, MLP, L2-normalised."""
    def __init__(self, vocab=20000, dim=64):
        super().__init__()
        self.hist = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.search = nn.EmbeddingBag(vocab, dim, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 256), nn.ReLU(), nn.Linear(256, dim))
    def forward(self, hist_ids, search_ids, search_w):
        h = self.hist(hist_ids)
        s = self.search(search_ids, per_sample_weights=search_w)
        u = self.mlp(torch.cat([h, s], dim=-1))
        return nn.functional.normalize(u, dim=-1)

def get_inputs():
    return [torch.randint(0, 20000, (16, 50), dtype=torch.int64), torch.randint(0, 20000, (16, 10), dtype=torch.int64), torch.rand(16, 10)]

def get_init_inputs():
    return [20000, 64]
