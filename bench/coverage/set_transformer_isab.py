import torch
import torch.nn as nn

class MAB(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln0 = nn.LayerNorm(d)
        self.ln1 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, d), nn.ReLU())
    def forward(self, q, k, key_padding_mask=None, attn_mask=None):
        o, w = self.mha(q, k, k, key_padding_mask=key_padding_mask, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
        h = self.ln0(q + o)
        return self.ln1(h + self.ff(h)), w

class Model(nn.Module):
    """Set Transformer: ISAB (learned inducing points expanded over batch attend to the set with key padding, the set attends back), SAB with a float additive attn_mask, PMA pooling with a learned seed; nn.MultiheadAttention(need_weights=True, average_attn_weights=False) returns per-head weights, which are also returned."""
    def __init__(self, d=64, h=4, m=8, k_out=1, n_out=5):
        super().__init__()
        self.I = nn.Parameter(torch.randn(1, m, d) * 0.1)
        self.S = nn.Parameter(torch.randn(1, k_out, d) * 0.1)
        self.inp = nn.Linear(3, d)
        self.mab0, self.mab1, self.sab, self.pma = MAB(d, h), MAB(d, h), MAB(d, h), MAB(d, h)
        self.out = nn.Linear(d, n_out)

    def forward(self, x, pad, bias):
        X = self.inp(x)
        B = X.size(0)
        H, _ = self.mab0(self.I.expand(B, -1, -1), X, key_padding_mask=pad)
        X, _ = self.mab1(X, H)
        X, w_sab = self.sab(X, X, attn_mask=bias)
        P, w_pma = self.pma(self.S.expand(B, -1, -1), X, key_padding_mask=pad)
        return self.out(P.squeeze(1)), w_pma

def get_inputs():
    pad = torch.zeros(4, 40, dtype=torch.bool)
    pad[:, 35:] = True
    return [torch.randn(4, 40, 3), pad, torch.randn(40, 40) * 0.1]

def get_init_inputs():
    return [64, 4, 8, 1, 5]
