import torch
import torch.nn as nn

class Model(nn.Module):
    """DCN-V2: embeddings of sparse fields (int64) concatenated with dense features, 3 cross layers x_{l+1} = x0 * (W x_l + b) + x_l, parallel deep MLP, logit."""
    def __init__(self, n_fields=26, vocab=1000, emb=16, n_dense=13, layers=3):
        super().__init__()
        self.emb = nn.Embedding(n_fields * vocab, emb)
        self.register_buffer("offsets", torch.arange(n_fields) * vocab)
        d = n_fields * emb + n_dense
        self.cross = nn.ModuleList([nn.Linear(d, d) for _ in range(layers)])
        self.deep = nn.Sequential(nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
        self.out = nn.Linear(d + 128, 1)
    def forward(self, sparse, dense):
        e = self.emb(sparse + self.offsets).flatten(1)
        x0 = torch.cat([e, dense], dim=1)
        x = x0
        for lin in self.cross:
            x = x0 * lin(x) + x
        return torch.sigmoid(self.out(torch.cat([x, self.deep(x0)], dim=1))).squeeze(1)

def get_inputs():
    return [torch.randint(0, 1000, (16, 26), dtype=torch.int64), torch.randn(16, 13)]

def get_init_inputs():
    return [26, 1000, 16, 13, 3]
