import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Discrete latent bottlenecks in training mode: F.gumbel_softmax(hard=True, tau) over codes (random Gumbel noise, argmax one-hot, straight-through), an argmax one-hot straight-through estimator y_hard - y_soft.detach() + y_soft written with zeros_like().scatter_(-1, idx, 1.0), and a sign/round straight-through binarizer x + (torch.round(x) - x).detach()."""
    def __init__(self, d=64, n_codes=32, code_dim=16, tau=0.8):
        super().__init__()
        self.to_logits = nn.Linear(d, n_codes)
        self.codebook = nn.Parameter(torch.randn(n_codes, code_dim))
        self.tau = tau
        self.dec = nn.Linear(2 * code_dim + d, d)

    def forward(self, x):
        logits = self.to_logits(x)
        g = F.gumbel_softmax(logits, tau=self.tau, hard=True, dim=-1)
        z1 = g @ self.codebook
        y_soft = logits.softmax(dim=-1)
        index = y_soft.max(dim=-1, keepdim=True)[1]
        y_hard = torch.zeros_like(logits).scatter_(-1, index, 1.0)
        st = y_hard - y_soft.detach() + y_soft
        z2 = st @ self.codebook
        b = torch.sigmoid(x)
        bin_ = b + (torch.round(b) - b).detach()
        return self.dec(torch.cat([z1, z2, bin_], dim=-1))

def get_inputs():
    return [torch.randn(32, 64)]

def get_init_inputs():
    return [64, 32, 16, 0.8]
