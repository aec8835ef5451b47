import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """SimCLR NT-Xent: projection head on two views, normalised, 2N x 2N similarity / tau, self-similarity removed with masked_fill(torch.eye(2N, dtype=bool), -inf) (or -9e15), positives picked with the (i + N) % 2N index, loss = -pos + logsumexp over the row; also top-1 accuracy via argmax."""
    def __init__(self, d=128, proj=64, tau=0.5):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, proj))
        self.tau = tau

    def forward(self, h1, h2):
        z = F.normalize(self.head(torch.cat([h1, h2], dim=0)), dim=1)
        n2 = z.shape[0]
        N = n2 // 2
        sim = z @ z.T / self.tau
        self_mask = torch.eye(n2, dtype=torch.bool, device=z.device)
        sim = sim.masked_fill(self_mask, -9e15)
        pos_mask = self_mask.roll(shifts=N, dims=0)
        pos = sim[pos_mask]
        nll = -pos + torch.logsumexp(sim, dim=-1)
        idx = torch.arange(n2, device=z.device)
        target = (idx + N) % n2
        acc = (sim.argmax(dim=-1) == target).float().mean()
        return nll.mean(), acc

def get_inputs():
    return [torch.randn(32, 128), torch.randn(32, 128)]

def get_init_inputs():
    return [128, 64, 0.5]
