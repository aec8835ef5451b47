"""Multi-token prediction (Medusa / "Better & Faster LLMs via multi-token prediction"): shared trunk output, n independent residual heads each predicting token t+1+i through a shared unembedding, cross-entropy per head on shifted targets with ignore_index=-100 padding, summed with decaying weights."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, h):
        return h + F.silu(self.fc(self.norm(h)))


class Model(nn.Module):
    def __init__(self, d=128, vocab=512, n_heads=3):
        super().__init__()
        self.heads = nn.ModuleList([Head(d) for _ in range(n_heads)])
        self.unembed = nn.Linear(d, vocab, bias=False)
        self.register_buffer("weights", torch.tensor([0.8 ** i for i in range(n_heads)]))

    def forward(self, h, targets):
        B, T, D = h.shape
        total = h.new_zeros(())
        for i, head in enumerate(self.heads):
            logits = self.unembed(head(h))  # (B, T, V)
            shift = i + 1
            tgt = torch.full_like(targets, -100)
            tgt[:, : T - shift] = targets[:, shift:]
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=-100)
            total = total + self.weights[i] * loss
        return total


def get_inputs():
    return [torch.randn(4, 32, 128), torch.randint(0, 512, (4, 32))]


def get_init_inputs():
    return []
