import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Mixture density network: shared MLP, pi logits -> log_softmax, mu, sigma = exp(.) (or ELU+1), diagonal Gaussian log-density per component summed over output dims, logsumexp over components, NLL; also torch.distributions.Normal for the same term as a cross-check."""
    def __init__(self, d_in=8, hid=64, K=5, d_out=2):
        super().__init__()
        self.K, self.d_out = K, d_out
        self.body = nn.Sequential(nn.Linear(d_in, hid), nn.Tanh(), nn.Linear(hid, hid), nn.Tanh())
        self.pi = nn.Linear(hid, K)
        self.mu = nn.Linear(hid, K * d_out)
        self.sigma = nn.Linear(hid, K * d_out)

    def forward(self, x, y):
        h = self.body(x)
        log_pi = F.log_softmax(self.pi(h), dim=-1)
        mu = self.mu(h).view(-1, self.K, self.d_out)
        sigma = F.elu(self.sigma(h)).view(-1, self.K, self.d_out) + 1 + 1e-6
        yk = y.unsqueeze(1).expand_as(mu)
        log_prob = -0.5 * ((yk - mu) / sigma) ** 2 - torch.log(sigma) - 0.5 * math.log(2 * math.pi)
        nll = -torch.logsumexp(log_pi + log_prob.sum(-1), dim=-1).mean()
        dist = torch.distributions.Normal(mu, sigma)
        nll2 = -torch.logsumexp(log_pi + dist.log_prob(yk).sum(-1), dim=-1).mean()
        return nll, nll2

def get_inputs():
    return [torch.randn(64, 8), torch.randn(64, 2)]

def get_init_inputs():
    return [8, 64, 5, 2]
