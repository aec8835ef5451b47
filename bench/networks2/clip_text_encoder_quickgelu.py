"""OpenAI CLIP's text encoder (two of its residual attention blocks): token and positional
embeddings, nn.MultiheadAttention with a causal float mask (-inf above the diagonal, a plain
attribute as CLIP keeps it), QuickGELU (x * sigmoid(1.702 x)) MLP, final LayerNorm, the EOT token's
features (argmax of the ids) projected by text_projection."""
import torch
import torch.nn as nn


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16 (CLIP's own)."""

    def forward(self, x):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, attn_mask):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model * 4), QuickGELU(), nn.Linear(d_model * 4, d_model))
        self.ln_2 = LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Model(nn.Module):
    def __init__(self, vocab_size=49408, context_length=77, width=512, heads=8, layers=2, embed_dim=512):
        super().__init__()
        self.context_length = context_length
        mask = torch.empty(context_length, context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.positional_embedding = nn.Parameter(torch.randn(context_length, width) * 0.01)
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, mask) for _ in range(layers)])
        self.ln_final = LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, embed_dim) * width ** -0.5)

    def forward(self, text):
        x = self.token_embedding(text)
        x = x + self.positional_embedding
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.resblocks(x)
        x = x.permute(1, 0, 2)
        x = self.ln_final(x)
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection


batch_size = 64
context_length = 77


def get_inputs():
    text = torch.randint(1, 49406, (batch_size, context_length))
    lengths = torch.randint(5, context_length, (batch_size,))
    text[torch.arange(batch_size), lengths] = 49407  # EOT, the largest id
    text = torch.where(torch.arange(context_length)[None] > lengths[:, None], torch.zeros_like(text), text)
    return [text]


def get_init_inputs():
    return [49408, context_length, 512, 8, 2, 512]
