import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Two-tower retrieval with in-batch negatives: user history pooled by nn.EmbeddingBag(mode='mean') over a flat id list with offsets (variable-length bags), item tower from id embedding + category EmbeddingBag(sum) with offsets, L2-normalised, logits / temperature minus logQ correction, cross entropy with arange labels."""
    def __init__(self, n_items=1000, n_cats=50, d=32, temp=0.05):
        super().__init__()
        self.hist = nn.EmbeddingBag(n_items, d, mode="mean")
        self.item = nn.Embedding(n_items, d)
        self.cats = nn.EmbeddingBag(n_cats, d, mode="sum")
        self.user_mlp = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, d))
        self.item_mlp = nn.Sequential(nn.Linear(2 * d, 64), nn.ReLU(), nn.Linear(64, d))
        self.temp = temp

    def forward(self, hist_ids, hist_offsets, item_ids, cat_ids, cat_offsets, log_q):
        u = F.normalize(self.user_mlp(self.hist(hist_ids, hist_offsets)), dim=-1)
        it = torch.cat([self.item(item_ids), self.cats(cat_ids, cat_offsets)], dim=-1)
        v = F.normalize(self.item_mlp(it), dim=-1)
        logits = u @ v.t() / self.temp - log_q.unsqueeze(0)
        labels = torch.arange(u.size(0), device=u.device)
        return F.cross_entropy(logits, labels)

def get_inputs():
    B = 8
    return [torch.randint(0, 1000, (60,)), torch.tensor([0, 5, 12, 20, 21, 30, 44, 50]),
            torch.randint(0, 1000, (B,)), torch.randint(0, 50, (14,)), torch.tensor([0, 1, 3, 4, 6, 9, 11, 12]),
            torch.rand(B).log()]

def get_init_inputs():
    return [1000, 50, 32, 0.05]
