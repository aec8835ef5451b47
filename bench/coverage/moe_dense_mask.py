"""Mixture of experts, top-2 with dense dispatch: scatter top-k weights into a one-hot combine matrix, run every expert, einsum-combine."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=256, h=512, n_experts=8, k=2):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(d, n_experts)
        self.w1 = nn.Parameter(torch.randn(n_experts, d, h) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(n_experts, h, d) * h ** -0.5)

    def forward(self, x):
        logits = self.gate(x)
        topv, topi = logits.topk(self.k, dim=-1)
        combine = torch.zeros_like(logits).scatter(-1, topi, F.softmax(topv, dim=-1))
        hidden = F.gelu(torch.einsum("btd,edh->bteh", x, self.w1))
        y = torch.einsum("bteh,ehd->bted", hidden, self.w2)
        return torch.einsum("bted,bte->btd", y, combine)


def get_inputs():
    return [torch.randn(4, 128, 256)]


def get_init_inputs():
    return []
