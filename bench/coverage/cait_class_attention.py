import torch
import torch.nn as nn

class ClassAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.h = heads
        self.scale = (dim // heads) ** -0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
    def forward(self, x):
        B, N, C = x.shape
        q = self.q(x[:, 0]).unsqueeze(1).reshape(B, 1, self.h, C // self.h).permute(0, 2, 1, 3)
        k = self.k(x).reshape(B, N, self.h, C // self.h).permute(0, 2, 1, 3)
        v = self.v(x).reshape(B, N, self.h, C // self.h).permute(0, 2, 1, 3)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        x_cls = (attn @ v).transpose(1, 2).reshape(B, 1, C)
        return self.proj(x_cls)

class Model(nn.Module):
    """CaiT class-attention stage: cls token expanded and concatenated to frozen patch tokens, 2 class-attention blocks (query from cls only, keys/values over [cls, patches]) with LayerScale gammas and an MLP, only the cls token updated, final LayerNorm and head."""
    def __init__(self, dim=64, heads=4, depth=2, ncls=10, init_values=1e-5):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.norm1 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(depth))
        self.attn = nn.ModuleList(ClassAttention(dim, heads) for _ in range(depth))
        self.norm2 = nn.ModuleList(nn.LayerNorm(dim) for _ in range(depth))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)) for _ in range(depth))
        self.gamma_1 = nn.Parameter(init_values * torch.ones(depth, dim))
        self.gamma_2 = nn.Parameter(init_values * torch.ones(depth, dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, ncls)

    def forward(self, x):
        cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
        for i in range(len(self.attn)):
            u = torch.cat((cls_tokens, x), dim=1)
            cls_tokens = cls_tokens + self.gamma_1[i] * self.attn[i](self.norm1[i](u))
            cls_tokens = cls_tokens + self.gamma_2[i] * self.mlp[i](self.norm2[i](cls_tokens))
        x = self.norm(torch.cat((cls_tokens, x), dim=1))
        return self.head(x[:, 0])

def get_inputs():
    return [torch.randn(4, 64, 64)]

def get_init_inputs():
    return [64, 4, 2, 10, 1e-5]
