"""Reference: an Elman RNN over bare parameters (h = tanh(x_t @ W_xh + h @ W_hh + b), no nn.Linear),
called once a step over a 256-step sequence from a given initial state; the output h_T @ W_hy."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.W_xh = nn.Parameter(torch.randn(input_size, hidden_size) / input_size**0.5)
        self.W_hh = nn.Parameter(torch.randn(hidden_size, hidden_size) / (3 * hidden_size) ** 0.5)
        self.b = nn.Parameter(torch.zeros(hidden_size))
        self.W_hy = nn.Parameter(torch.randn(hidden_size, output_size) / hidden_size**0.5)

    def forward(self, x, h0):
        h = h0
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ self.W_xh + h @ self.W_hh + self.b)
        return h @ self.W_hy


def get_inputs():
    return [torch.randn(8, 256, 32), torch.randn(8, 64)]


def get_init_inputs():
    return [32, 64, 16]
