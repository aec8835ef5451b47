import torch
import torch.nn as nn

class Model(nn.Module):
    """Entropic OT (log-domain Sinkhorn, as in SuperGlue's optimal transport / POT-style losses): cost = squared cdist between projected point sets, fixed iterations alternating u = log_mu - logsumexp(Z + v), v = log_nu - logsumexp(Z + u), transport plan exp, Sinkhorn cost sum(P * C)."""
    def __init__(self, d=32, eps=0.1, iters=20):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.eps, self.iters = eps, iters

    def forward(self, x, y):
        a, b = self.proj(x), self.proj(y)
        C = torch.cdist(a, b) ** 2
        B, n, m = C.shape
        log_mu = torch.full((B, n), -torch.log(torch.tensor(float(n))).item(), device=x.device)
        log_nu = torch.full((B, m), -torch.log(torch.tensor(float(m))).item(), device=x.device)
        Z = -C / self.eps
        u, v = torch.zeros_like(log_mu), torch.zeros_like(log_nu)
        for _ in range(self.iters):
            u = log_mu - torch.logsumexp(Z + v.unsqueeze(1), dim=2)
            v = log_nu - torch.logsumexp(Z + u.unsqueeze(2), dim=1)
        P = torch.exp(Z + u.unsqueeze(2) + v.unsqueeze(1))
        return (P * C).sum(dim=(1, 2)).mean(), P

def get_inputs():
    return [torch.randn(4, 48, 32), torch.randn(4, 40, 32)]

def get_init_inputs():
    return [32, 0.1, 20]
