import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Regularisers active in training mode (the default after construction): nn.Embedding(max_norm=1.0, padding_idx=0) (renormalises looked-up rows in place), word dropout replacing tokens with UNK via torch.bernoulli, nn.Dropout2d / nn.Dropout1d channel dropout, AlphaDropout after SELU, FeatureAlphaDropout, F.dropout(training=True)."""
    def __init__(self, vocab=500, d=32, unk=1, p_word=0.1):
        super().__init__()
        self.unk, self.p_word = unk, p_word
        self.emb = nn.Embedding(vocab, d, padding_idx=0, max_norm=1.0)
        self.conv1d = nn.Conv1d(d, d, 3, padding=1)
        self.d1 = nn.Dropout1d(0.2)
        self.conv2d = nn.Conv2d(1, 4, 3, padding=1)
        self.d2 = nn.Dropout2d(0.2)
        self.fc = nn.Linear(d + 4, d)
        self.ad = nn.AlphaDropout(0.1)
        self.fad = nn.FeatureAlphaDropout(0.1)

    def forward(self, tokens):
        drop = torch.bernoulli(torch.full(tokens.shape, self.p_word, device=tokens.device)).bool() & (tokens != 0)
        tokens = tokens.masked_fill(drop, self.unk)
        e = self.emb(tokens)                                     # B, T, d
        h = self.d1(torch.relu(self.conv1d(e.transpose(1, 2))))  # B, d, T
        img = self.d2(torch.relu(self.conv2d(e.unsqueeze(1))))   # B, 4, T, d
        z = torch.cat([h.mean(2), img.mean(dim=(2, 3))], dim=1)
        z = self.ad(F.selu(self.fc(z)))
        z = self.fad(z.unsqueeze(-1)).squeeze(-1)
        return F.dropout(z, 0.1, training=True)

def get_inputs():
    return [torch.randint(0, 500, (8, 30))]

def get_init_inputs():
    return [500, 32, 1, 0.1]
