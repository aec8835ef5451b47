"""2-layer LSTM language-model step with explicit (h0, c0) inputs, returning logits and the new state."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=256, h=512, vocab=4000):
        super().__init__()
        self.lstm = nn.LSTM(d, h, num_layers=2, batch_first=True)
        self.head = nn.Linear(h, vocab)

    def forward(self, x, h0, c0):
        out, (hn, cn) = self.lstm(x, (h0, c0))
        return self.head(out), hn, cn


def get_inputs():
    return [torch.randn(16, 50, 256), torch.randn(2, 16, 512), torch.randn(2, 16, 512)]


def get_init_inputs():
    return []
