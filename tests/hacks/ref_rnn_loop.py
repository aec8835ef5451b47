"""Reference: an Elman RNN written by hand, as KernelBench's VanillaRNN cell is (nn.Linear over
cat(x_t, h), tanh), called once a step over a 256-step sequence from a given initial state; the
output layer on the last state."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0):
        h = h0
        for t in range(x.shape[1]):
            h = torch.tanh(self.i2h(torch.cat((x[:, t], h), dim=1)))
        return self.h2o(h)


def get_inputs():
    return [torch.randn(8, 256, 32), torch.randn(8, 64)]


def get_init_inputs():
    return [32, 64, 16]
