import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """QK-norm attention (ViT-22B / SD3 / OLMo style, fp16): per-head LayerNorm on q and k, SDPA with a boolean key-padding attn_mask broadcast over heads and queries."""
    def __init__(self, dim=384, heads=6):
        super().__init__()
        self.h, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_norm = nn.LayerNorm(self.hd); self.k_norm = nn.LayerNorm(self.hd)
        self.proj = nn.Linear(dim, dim)
        self.half()
    def forward(self, x, key_valid):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.h, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        mask = key_valid[:, None, None, :]
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))

def get_inputs():
    valid = torch.ones(4, 256, dtype=torch.bool); valid[1, 200:] = False; valid[3, 100:] = False
    return [torch.randn(4, 256, 384).half(), valid]

def get_init_inputs():
    return [384, 6]
