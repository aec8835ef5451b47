"""Reference: a 2-layer tanh RNN over a 512-step sequence, returning the last hidden state h_n (as
KernelBench level 3's RNN/LSTM/GRU "Hn" problems do)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size, num_layers, batch_first=True)

    def forward(self, x):
        _, h_n = self.rnn(x)
        return h_n


def get_inputs():
    return [torch.randn(8, 512, 32)]


def get_init_inputs():
    return [32, 64, 2]
