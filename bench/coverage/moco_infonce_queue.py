"""MoCo v2 InfoNCE with a negatives queue buffer: F.normalize of query and key, positive logits by einsum('nc,nc->n'), negatives by einsum('nc,ck->nk') against the queue, cat, divide by temperature, cross_entropy against zeros labels (torch.zeros(..., dtype=long))."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim=128, K=1024, T=0.07):
        super().__init__()
        self.T = T
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))

    def forward(self, q, k):
        q = F.normalize(q, dim=1)
        k = F.normalize(k, dim=1)
        l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", q, self.queue.clone().detach())
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long, device=q.device)
        return F.cross_entropy(logits, labels)


def get_inputs():
    return [torch.randn(64, 128), torch.randn(64, 128)]


def get_init_inputs():
    return []
