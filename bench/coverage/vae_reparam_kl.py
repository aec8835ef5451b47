import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Conv VAE training loss: encoder to mu/logvar, reparameterisation z = mu + eps * exp(0.5 logvar) with eps = torch.randn_like(std), decoder with ConvTranspose2d, BCE-with-logits reconstruction summed per image, KL = -0.5 sum(1 + logvar - mu^2 - exp(logvar)), beta-weighted ELBO."""
    def __init__(self, c=1, z=16, beta=4.0):
        super().__init__()
        self.beta = beta
        self.enc = nn.Sequential(nn.Conv2d(c, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 4, 2, 1), nn.ReLU(), nn.Flatten())
        self.fc_mu = nn.Linear(64 * 7 * 7, z)
        self.fc_lv = nn.Linear(64 * 7 * 7, z)
        self.fc_dec = nn.Linear(z, 64 * 7 * 7)
        self.dec = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, c, 4, 2, 1))

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.fc_mu(h), self.fc_lv(h)
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        z = mu + eps * std
        logits = self.dec(self.fc_dec(z).view(-1, 64, 7, 7))
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.size(0)
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.size(0)
        return rec + self.beta * kld, logits.sigmoid()

def get_inputs():
    return [torch.rand(8, 1, 28, 28)]

def get_init_inputs():
    return [1, 16, 4.0]
