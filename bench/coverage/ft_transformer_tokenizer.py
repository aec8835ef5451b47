import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """FT-Transformer feature tokenizer: numeric x_j * W_j + b_j, categorical embeddings with per-field offsets, [CLS] appended, one pre-norm attention layer via SDPA, head on CLS."""
    def __init__(self, n_num=8, cat_cards=(3, 10, 7, 20), d=64, heads=8):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_num + 1, d) / math.sqrt(d))
        self.bias = nn.Parameter(torch.randn(n_num, d) / math.sqrt(d))
        self.register_buffer("cat_offsets", torch.tensor([0] + list(cat_cards[:-1])).cumsum(0))
        self.cat_emb = nn.Embedding(sum(cat_cards), d)
        self.cat_bias = nn.Parameter(torch.zeros(len(cat_cards), d))
        self.h = heads
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.ReLU(), nn.Linear(d, 1))
    def forward(self, x_num, x_cat):
        B = x_num.shape[0]
        x_num = torch.cat([torch.ones(B, 1, device=x_num.device), x_num], dim=1)
        x = self.weight[None] * x_num[:, :, None]
        x = torch.cat([x[:, :1], x[:, 1:] + self.bias[None]], dim=1)
        x = torch.cat([x, self.cat_emb(x_cat + self.cat_offsets[None]) + self.cat_bias[None]], dim=1)
        N, D = x.shape[1], x.shape[2]
        q, k, v = self.qkv(self.norm(x)).view(B, N, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, D))
        return self.head(x[:, 0]).squeeze(-1)

def get_inputs():
    cards = (3, 10, 7, 20)
    return [torch.randn(16, 8), torch.stack([torch.randint(0, c, (16,)) for c in cards], 1)]

def get_init_inputs():
    return [8, (3, 10, 7, 20), 64, 8]
