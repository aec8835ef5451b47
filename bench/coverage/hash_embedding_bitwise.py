import torch
import torch.nn as nn

class Model(nn.Module):
    """Multi-hash ('hashing trick') embeddings for huge id spaces: k universal hashes ((a * id + b) % P) % buckets on int64, a feature-cross id from bitwise_xor of two fields plus right shift, floor_divide for a coarse id, remainder; sum of hashed embeddings, MLP."""
    def __init__(self, buckets=1024, d=32, k=3):
        super().__init__()
        self.buckets, self.k = buckets, k
        self.P = 2147483647
        g = torch.Generator().manual_seed(0)
        self.register_buffer("a", torch.randint(1, self.P - 1, (k,), generator=g))
        self.register_buffer("b", torch.randint(0, self.P - 1, (k,), generator=g))
        self.table = nn.Embedding(buckets, d)
        self.cross = nn.Embedding(buckets, d)
        self.coarse = nn.Embedding(buckets, d)
        self.mlp = nn.Sequential(nn.Linear(3 * d, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, user_id, item_id):
        h = ((self.a * user_id.unsqueeze(-1) + self.b) % self.P) % self.buckets   # B, k
        e = self.table(h).sum(dim=1)
        x = torch.bitwise_xor(user_id, item_id << 7) >> 3
        c = self.cross(torch.remainder(x, self.buckets))
        coarse = self.coarse(torch.floor_divide(item_id, 1000) % self.buckets)
        return self.mlp(torch.cat([e, c, coarse], dim=-1)).squeeze(-1)

def get_inputs():
    return [torch.randint(0, 10**9, (64,)), torch.randint(0, 10**7, (64,))]

def get_init_inputs():
    return [1024, 32, 3]
