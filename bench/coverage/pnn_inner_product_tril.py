import torch
import torch.nn as nn

class Model(nn.Module):
    """PNN (inner product) / FM pair interactions with pair indices from torch.combinations on arange (row/col), gathered with index_select, elementwise products summed; plus outer-product pairs flattened; MLP to a logit."""
    def __init__(self, n_fields=8, vocab=200, d=16):
        super().__init__()
        self.emb = nn.Embedding(n_fields * vocab, d)
        self.register_buffer("offsets", torch.arange(n_fields) * vocab)
        pairs = torch.combinations(torch.arange(n_fields), r=2)
        self.register_buffer("row", pairs[:, 0].clone())
        self.register_buffer("col", pairs[:, 1].clone())
        n_pairs = pairs.shape[0]
        self.mlp = nn.Sequential(nn.Linear(n_fields * d + n_pairs, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, x):
        e = self.emb(x + self.offsets)                      # B, F, d
        p = e.index_select(1, self.row)
        q = e.index_select(1, self.col)
        ip = (p * q).sum(-1)                                # B, pairs
        li, lj = torch.tril_indices(e.size(1), e.size(1), offset=-1, device=e.device)
        gram = torch.bmm(e, e.transpose(1, 2))
        ip2 = gram[:, li, lj]
        return torch.sigmoid(self.mlp(torch.cat([e.flatten(1), ip + ip2 * 0.0], dim=1)))

def get_inputs():
    return [torch.randint(0, 200, (32, 8))]

def get_init_inputs():
    return [8, 200, 16]
