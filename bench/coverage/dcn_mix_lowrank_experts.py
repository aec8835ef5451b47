"""DCN-Mix (DCN-V2's mixture of low-rank cross experts): per layer, each expert projects x_l to rank r (V), tanh, r x r (C), tanh, back to d (U), x0 * (U(..) + b); expert outputs weighted by a softmax gate on x_l, stacked and summed, plus residual; then a logit."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=128, r=32, experts=4, layers=2):
        super().__init__()
        self.L, self.E = layers, experts
        self.U = nn.Parameter(torch.randn(layers, experts, d, r) * 0.05)
        self.V = nn.Parameter(torch.randn(layers, experts, d, r) * 0.05)
        self.C = nn.Parameter(torch.randn(layers, experts, r, r) * 0.05)
        self.b = nn.Parameter(torch.zeros(layers, d, 1))
        self.gates = nn.ModuleList([nn.Linear(d, 1, bias=False) for _ in range(experts)])
        self.logit = nn.Linear(d, 1)

    def forward(self, x):
        x0 = x.unsqueeze(2)  # B, d, 1
        xl = x0
        for i in range(self.L):
            outs, gs = [], []
            for e in range(self.E):
                gs.append(self.gates[e](xl.squeeze(2)))
                v = torch.tanh(torch.matmul(self.V[i, e].t(), xl))
                v = torch.tanh(torch.matmul(self.C[i, e], v))
                uv = torch.matmul(self.U[i, e], v)
                outs.append((x0 * (uv + self.b[i])).squeeze(2))
            outs = torch.stack(outs, 2)  # B, d, E
            g = torch.softmax(torch.stack(gs, 1), 1)  # B, E, 1
            xl = torch.matmul(outs, g) + xl
        return self.logit(xl.squeeze(2))


def get_inputs():
    return [torch.randn(16, 128)]


def get_init_inputs():
    return []
