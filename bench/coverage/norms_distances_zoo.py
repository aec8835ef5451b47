import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Norm and distance spellings found in metric-learning / regularisation code: torch.norm(p=1), torch.norm(p=float('inf')), torch.norm(p='fro') over dims, torch.linalg.norm(ord=2) on vectors, torch.linalg.vector_norm(ord=3), torch.linalg.matrix_norm('nuc'-free 'fro'), torch.dist(p=1), F.pairwise_distance(p=2, eps), F.cosine_similarity over dim=1, torch.renorm for a max-norm constraint."""
    def __init__(self, d=64):
        super().__init__()
        self.fa = nn.Linear(d, d)
        self.fb = nn.Linear(d, d)

    def forward(self, x, y):
        a, b = self.fa(x), self.fb(y)
        n1 = torch.norm(a, p=1, dim=1)
        ninf = torch.norm(a - b, p=float("inf"), dim=1)
        nfro = torch.norm(a.view(a.size(0), 8, -1), p="fro", dim=(1, 2))
        n2 = torch.linalg.norm(b, ord=2, dim=-1)
        n3 = torch.linalg.vector_norm(a, ord=3, dim=-1)
        mf = torch.linalg.matrix_norm(self.fa.weight, ord="fro")
        dd = torch.dist(a, b, p=1)
        pd = F.pairwise_distance(a, b, p=2.0, eps=1e-6)
        cs = F.cosine_similarity(a, b, dim=1, eps=1e-8)
        rn = torch.renorm(a, p=2, dim=0, maxnorm=1.0)
        return n1 + ninf + nfro + n2 + n3 + pd + cs + rn.sum(1), mf + dd

def get_inputs():
    return [torch.randn(32, 64), torch.randn(32, 64)]

def get_init_inputs():
    return [64]
