import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Evidential deep learning (Sensoy et al.) classification loss: evidence = softplus(logits), alpha = e + 1, expected-MSE / digamma-based cross entropy term sum(y (digamma(S) - digamma(alpha))), KL(Dir(alpha_tilde) || Dir(1)) with torch.lgamma and torch.digamma, annealing coefficient, uncertainty K / S."""
    def __init__(self, d=64, K=10, anneal=0.5):
        super().__init__()
        self.K, self.anneal = K, anneal
        self.net = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, K))

    def kl(self, alpha):
        ones = torch.ones_like(alpha)
        S = alpha.sum(1, keepdim=True)
        first = torch.lgamma(S) - torch.lgamma(alpha).sum(1, keepdim=True) - torch.lgamma(ones.sum(1, keepdim=True))
        second = ((alpha - ones) * (torch.digamma(alpha) - torch.digamma(S))).sum(1, keepdim=True)
        return first + second

    def forward(self, x, target):
        evidence = F.softplus(self.net(x))
        alpha = evidence + 1
        y = F.one_hot(target, self.K).float()
        S = alpha.sum(1, keepdim=True)
        ce = (y * (torch.digamma(S) - torch.digamma(alpha))).sum(1, keepdim=True)
        alpha_tilde = y + (1 - y) * alpha
        loss = ce + self.anneal * self.kl(alpha_tilde)
        return loss.mean(), self.K / S.squeeze(1)

def get_inputs():
    return [torch.randn(32, 64), torch.randint(0, 10, (32,))]

def get_init_inputs():
    return [64, 10, 0.5]
