"""Mixture of experts with top-2 routing (Mixtral style): softmax gate, topk, renormalise, loop over experts with torch.where + index_add_."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w3 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Model(nn.Module):
    def __init__(self, d=256, h=512, n_experts=8, k=2):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, h) for _ in range(n_experts)])

    def forward(self, x):
        b, t, d = x.shape
        x = x.view(-1, d)
        probs = F.softmax(self.gate(x), dim=-1)
        w, idx = torch.topk(probs, self.k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            if tok.numel() == 0:
                continue
            y = expert(x[tok]) * w[tok, slot].unsqueeze(-1)
            out.index_add_(0, tok, y)
        return out.view(b, t, d)


def get_inputs():
    return [torch.randn(8, 256, 256)]


def get_init_inputs():
    return []
