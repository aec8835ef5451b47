"""A convolutional VAE encoder: four stride-2 convolutions with LeakyReLU, flattened, two Linear
heads for the mean and log-variance."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, latent: int = 128):
        super().__init__()
        chans = [3, 32, 64, 128, 256]
        self.convs = nn.Sequential(*[m for a, b in zip(chans, chans[1:], strict=False)
                                     for m in (nn.Conv2d(a, b, 4, stride=2, padding=1), nn.LeakyReLU(0.2))])
        self.mu = nn.Linear(256 * 4 * 4, latent)
        self.logvar = nn.Linear(256 * 4 * 4, latent)

    def forward(self, x):
        h = self.convs(x).flatten(1)
        return self.mu(h), self.logvar(h)


batch_size = 64


def get_inputs():
    return [torch.randn(batch_size, 3, 64, 64)]


def get_init_inputs():
    return []
