"""Bidirectional 2-layer GRU encoder over embedded tokens (batch_first), final hidden states of both directions concatenated and projected."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab=8000, d=256, h=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, h, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * h, h)

    def forward(self, ids):
        out, hn = self.gru(self.emb(ids))
        return out, torch.tanh(self.fc(torch.cat([hn[-2], hn[-1]], dim=-1)))


def get_inputs():
    return [torch.randint(0, 8000, (16, 64))]


def get_init_inputs():
    return []
