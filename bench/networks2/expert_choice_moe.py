"""Expert-choice MoE layer (Zhou et al. 2022): each expert picks its top-C tokens (topk over the
token axis of the softmaxed router scores, C = tokens * capacity_factor / experts), the picked
tokens are gathered, run through the expert's SwiGLU FFN as one batched einsum over stacked
weights, weighted by their router score and index_add_'ed back to the token positions."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model=512, d_ff=1024, num_experts=8, capacity_factor=2.0):
        super().__init__()
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(num_experts, d_model, d_ff) * d_model ** -0.5)
        self.w3 = nn.Parameter(torch.randn(num_experts, d_model, d_ff) * d_model ** -0.5)
        self.w2 = nn.Parameter(torch.randn(num_experts, d_ff, d_model) * d_ff ** -0.5)

    def forward(self, x):
        B, S, D = x.shape
        tokens = x.reshape(-1, D)
        T = tokens.shape[0]
        capacity = int(T * self.capacity_factor / self.num_experts)
        scores = F.softmax(self.router(tokens), dim=-1)  # (T, E)
        gates, idx = torch.topk(scores.t(), k=capacity, dim=-1)  # (E, C) each
        picked = tokens[idx]  # (E, C, D)
        h = F.silu(torch.einsum("ecd,edf->ecf", picked, self.w1)) * torch.einsum("ecd,edf->ecf", picked, self.w3)
        out = torch.einsum("ecf,efd->ecd", h, self.w2) * gates.unsqueeze(-1)
        y = torch.zeros_like(tokens)
        y.index_add_(0, idx.reshape(-1), out.reshape(-1, D))
        return y.view(B, S, D)


batch_size = 8
seq_len = 512
d_model = 512


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, 1024, 8, 2.0]
