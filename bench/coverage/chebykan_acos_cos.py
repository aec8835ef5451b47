import torch
import torch.nn as nn


class ChebyKANLayer(nn.Module):
    def __init__(self, input_dim, output_dim, degree):
        super().__init__()
        self.inputdim, self.outdim, self.degree = input_dim, output_dim, degree
        self.cheby_coeffs = nn.Parameter(torch.empty(input_dim, output_dim, degree + 1))
        nn.init.normal_(self.cheby_coeffs, mean=0.0, std=1 / (input_dim * (degree + 1)))
        self.register_buffer("arange", torch.arange(0, degree + 1, 1))

    def forward(self, x):
        x = torch.reshape(x, (-1, self.inputdim))
        x = torch.tanh(x)
        x = x.view((-1, self.inputdim, 1)).expand(-1, -1, self.degree + 1)
        x = x.acos()
        x *= self.arange
        x = x.cos()
        y = torch.einsum("bid,iod->bo", x, self.cheby_coeffs)
        return y.view(-1, self.outdim)


class Model(nn.Module):
    """ChebyKAN (Chebyshev-polynomial KAN) MLP: tanh squashing, T_n(x) = cos(n * acos(x)) via expand, acos, in-place
    multiply by an arange buffer (int64 times float), cos, einsum('bid,iod->bo'), LayerNorm between layers."""
    def __init__(self, dims=(128, 256, 256, 10), degree=4):
        super().__init__()
        layers = []
        for i in range(len(dims) - 1):
            layers.append(ChebyKANLayer(dims[i], dims[i + 1], degree))
            if i < len(dims) - 2:
                layers.append(nn.LayerNorm(dims[i + 1]))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(512, 128)]


def get_init_inputs():
    return [(128, 256, 256, 10), 4]
