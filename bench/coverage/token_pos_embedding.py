"""BERT-style embeddings: token + learned position + token-type embeddings (int64 ids), LayerNorm."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab=30522, max_pos=512, types=2, d=768):
        super().__init__()
        self.tok = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Embedding(max_pos, d)
        self.typ = nn.Embedding(types, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, ids, type_ids):
        pos = torch.arange(ids.size(1), device=ids.device).unsqueeze(0)
        return self.norm(self.tok(ids) + self.pos(pos) + self.typ(type_ids))


def get_inputs():
    return [torch.randint(0, 30522, (16, 128)), torch.randint(0, 2, (16, 128))]


def get_init_inputs():
    return []
