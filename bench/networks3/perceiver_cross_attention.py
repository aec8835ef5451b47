"""Perceiver IO encoder cross-attention (deepmind/perceiver; HF transformers' PerceiverLayer): learned
latents attend, with one head, to a longer input array through nn.MultiheadAttention (batch_first,
kdim/vdim of the inputs), each side LayerNormed first; residual, then a LayerNorm + GELU MLP residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_latents=256, d_latents=512, d_inputs=256, num_heads=1, widening_factor=4):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_latents, d_latents))
        self.layernorm_q = nn.LayerNorm(d_latents)
        self.layernorm_kv = nn.LayerNorm(d_inputs)
        self.attention = nn.MultiheadAttention(d_latents, num_heads, kdim=d_inputs, vdim=d_inputs,
                                               batch_first=True)
        self.layernorm = nn.LayerNorm(d_latents)
        self.mlp = nn.Sequential(nn.Linear(d_latents, widening_factor * d_latents), nn.GELU(),
                                 nn.Linear(widening_factor * d_latents, d_latents))

    def forward(self, inputs):
        latents = self.latents.expand(inputs.shape[0], -1, -1)
        q = self.layernorm_q(latents)
        kv = self.layernorm_kv(inputs)
        attn, _ = self.attention(q, kv, kv, need_weights=False)
        latents = latents + attn
        return latents + self.mlp(self.layernorm(latents))


batch_size = 8
input_len = 2048
d_inputs = 256


def get_inputs():
    return [torch.randn(batch_size, input_len, d_inputs)]


def get_init_inputs():
    return [256, 512, d_inputs]
