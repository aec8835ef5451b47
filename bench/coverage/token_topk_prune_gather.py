import torch
import torch.nn as nn

class Model(nn.Module):
    """EViT/DynamicViT token pruning: CLS-attention scores, topk keep indices, torch.gather kept tokens, fuse the rest into one token by a score-weighted sum, concat."""
    def __init__(self, dim=384, keep=98):
        super().__init__()
        self.keep = keep
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
    def forward(self, x):
        B, N, C = x.shape
        cls, tok = x[:, :1], x[:, 1:]
        attn = (self.q(cls) @ self.k(tok).transpose(1, 2)).squeeze(1) / C ** 0.5
        attn = attn.softmax(-1)
        score, idx = torch.topk(attn, self.keep, dim=1, largest=True, sorted=True)
        kept = torch.gather(tok, 1, idx.unsqueeze(-1).expand(-1, -1, C))
        mask = torch.ones_like(attn).scatter(1, idx, 0.0)
        w = attn * mask
        fused = (tok * w.unsqueeze(-1)).sum(1, keepdim=True) / (w.sum(1, keepdim=True).unsqueeze(-1) + 1e-6)
        return torch.cat([cls, kept, fused], dim=1)

def get_inputs():
    return [torch.randn(8, 197, 384)]

def get_init_inputs():
    return [384, 98]
