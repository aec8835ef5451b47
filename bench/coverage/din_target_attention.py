"""Deep Interest Network (DIN) target attention: item embedding of the candidate and of a padded behaviour sequence (padding_idx=0), attention MLP on [h, t, h-t, h*t] with Dice-free PReLU, padded positions masked_fill(-inf)-free (DIN keeps unnormalised scores: multiplied by the mask), weighted sum pooling, then an MLP with the user profile embedding-bag sum to a sigmoid CTR."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_items=1000, n_feats=500, d=32):
        super().__init__()
        self.item = nn.Embedding(n_items, d, padding_idx=0)
        self.profile = nn.EmbeddingBag(n_feats, d, mode="sum")
        self.att = nn.Sequential(nn.Linear(4 * d, 64), nn.PReLU(), nn.Linear(64, 16), nn.PReLU(), nn.Linear(16, 1))
        self.mlp = nn.Sequential(nn.Linear(3 * d, 128), nn.PReLU(), nn.Linear(128, 1))

    def forward(self, hist, target, prof):
        h = self.item(hist)  # B, L, d
        t = self.item(target).unsqueeze(1).expand_as(h)
        w = self.att(torch.cat([h, t, h - t, h * t], dim=-1)).squeeze(-1)  # B, L
        w = w * (hist != 0).float()
        interest = torch.bmm(w.unsqueeze(1), h).squeeze(1)
        p = self.profile(prof)  # (B, bag) 2-D input: fixed-size bags
        z = torch.cat([interest, self.item(target), p], dim=-1)
        return torch.sigmoid(self.mlp(z)).squeeze(-1)


def get_inputs():
    hist = torch.randint(1, 1000, (8, 50))
    hist[:, 35:] = 0
    hist[2, 10:] = 0
    return [hist, torch.randint(1, 1000, (8,)), torch.randint(0, 500, (8, 6))]


def get_init_inputs():
    return []
