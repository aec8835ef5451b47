"""Gated CNN language model (Dauphin et al., 2017) as written today: token embedding, causal left padding with F.pad(x, (k-1, 0)), Conv1d to 2C, F.glu over channels, residual every block, final adaptive-free Linear to the vocabulary and log_softmax."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, vocab=500, c=128, k=4, layers=3):
        super().__init__()
        self.k = k
        self.emb = nn.Embedding(vocab, c)
        self.convs = nn.ModuleList([nn.Conv1d(c, 2 * c, k) for _ in range(layers)])
        self.out = nn.Linear(c, vocab)

    def forward(self, tokens):
        h = self.emb(tokens).transpose(1, 2)  # B, C, T
        for conv in self.convs:
            y = F.glu(conv(F.pad(h, (self.k - 1, 0))), dim=1)
            h = h + y
        return F.log_softmax(self.out(h.transpose(1, 2)), dim=-1)


def get_inputs():
    return [torch.randint(0, 500, (4, 64))]


def get_init_inputs():
    return []
