import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """HF Wav2Vec2 front end: conv feature encoder (7 Conv1d layers, kernel/stride (10,5),(3,2)x4,(2,2)x2, first with
    GroupNorm(C, C) 'group' norm, GELU), transpose, feature projection (LayerNorm, Linear), then the positional conv
    embedding: grouped Conv1d (k=128, groups=16, padding 64) under weight_norm(name='weight', dim=2), SamePad removal
    of the last frame, GELU, residual add, encoder LayerNorm."""
    def __init__(self, conv_dim=256, hidden=384, pos_k=128, pos_groups=16):
        super().__init__()
        ks, ss = (10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2)
        self.convs = nn.ModuleList()
        cin = 1
        for k, s in zip(ks, ss):
            self.convs.append(nn.Conv1d(cin, conv_dim, k, s, bias=False))
            cin = conv_dim
        self.gn = nn.GroupNorm(conv_dim, conv_dim, affine=True)
        self.fp_norm = nn.LayerNorm(conv_dim, eps=1e-5)
        self.fp = nn.Linear(conv_dim, hidden)
        conv = nn.Conv1d(hidden, hidden, pos_k, padding=pos_k // 2, groups=pos_groups)
        self.pos_conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
        self.remove = 1 if pos_k % 2 == 0 else 0
        self.enc_norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, input_values):
        h = input_values[:, None]
        for i, conv in enumerate(self.convs):
            h = conv(h)
            if i == 0:
                h = self.gn(h)
            h = F.gelu(h)
        h = h.transpose(1, 2)
        h = self.fp(self.fp_norm(h))
        p = self.pos_conv(h.transpose(1, 2))
        if self.remove > 0:
            p = p[:, :, : -self.remove]
        p = F.gelu(p).transpose(1, 2)
        return self.enc_norm(h + p)


def get_inputs():
    return [torch.randn(8, 32000)]


def get_init_inputs():
    return [256, 384, 128, 16]
