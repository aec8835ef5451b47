"""PyTorch's own nn.TransformerEncoderLayer (post-norm, ReLU, batch-first), no dropout."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model: int = 512, nhead: int = 8, ff: int = 2048):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, nhead, ff, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


batch_size = 16
seq_len = 128


def get_inputs():
    return [torch.randn(batch_size, seq_len, 512)]


def get_init_inputs():
    return []
