"""An MLP-Mixer block: token mixing (LayerNorm, transpose, an MLP over the patches, transpose back)
and channel mixing (LayerNorm, an MLP over the channels), each with a residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, tokens: int = 196, dim: int = 512, token_hidden: int = 256, channel_hidden: int = 2048):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token = nn.Sequential(nn.Linear(tokens, token_hidden), nn.GELU(), nn.Linear(token_hidden, tokens))
        self.channel = nn.Sequential(nn.Linear(dim, channel_hidden), nn.GELU(), nn.Linear(channel_hidden, dim))

    def forward(self, x):
        x = x + self.token(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel(self.norm2(x))


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 196, 512)]


def get_init_inputs():
    return []
