"""Transformer decoder layer (PyTorch nn.TransformerDecoderLayer): causal self-attn + cross-attn + FFN."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model=256, nhead=8, ff=1024):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(d_model, nhead, ff, dropout=0.0, batch_first=True, norm_first=True)

    def forward(self, tgt, memory):
        t = tgt.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=tgt.device)
        return self.layer(tgt, memory, tgt_mask=mask, tgt_is_causal=True)


def get_inputs():
    return [torch.randn(8, 128, 256), torch.randn(8, 196, 256)]


def get_init_inputs():
    return []
