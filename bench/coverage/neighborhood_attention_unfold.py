import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Neighborhood attention (NAT/DiNAT) written without NATTEN, channels-last: qkv Linear, keys/values padded with
    F.pad and cut into k x k neighbourhoods by two Tensor.unfold calls (H then W, windows clamped at borders by
    replicate-free zero padding plus an additive -inf mask from an unfolded validity map), dilation 2,
    scores by einsum('bhijd,bhijkd->bhijk') plus a learned relative position bias gathered by a fixed index buffer,
    softmax, weighted sum, proj."""
    def __init__(self, dim=128, heads=4, k=7, dilation=2):
        super().__init__()
        self.h, self.k, self.dil = heads, k, dilation
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.rpb = nn.Parameter(torch.randn(heads, 2 * k - 1, 2 * k - 1) * 0.02)
        r = torch.arange(k)
        self.register_buffer("rel_idx", (r[:, None] + k // 2) * (2 * k - 1) + (r[None, :] + k // 2), persistent=False)

    def forward(self, x):
        B, H, W, C = x.shape
        k, d, h = self.k, self.dil, self.h
        pad = (k // 2) * d
        qkv = self.qkv(x).reshape(B, H, W, 3, h, C // h).permute(3, 0, 4, 1, 2, 5)
        q, kk, v = qkv[0] * self.scale, qkv[1], qkv[2]                           # B h H W hd
        def windows(t):
            t = F.pad(t, (0, 0, pad, pad, pad, pad))                               # pad W and H
            t = t.unfold(2, (k - 1) * d + 1, 1).unfold(3, (k - 1) * d + 1, 1)     # B h H W hd kh kw
            t = t[..., ::d, ::d]
            return t.flatten(-2).transpose(-1, -2)                                 # B h H W k*k hd
        kw, vw = windows(kk), windows(v)
        valid = F.pad(torch.ones(1, 1, H, W, device=x.device), (pad, pad, pad, pad))
        valid = valid.unfold(2, (k - 1) * d + 1, 1).unfold(3, (k - 1) * d + 1, 1)[..., ::d, ::d].flatten(-2)  # 1 1 H W kk
        attn = torch.einsum("bhijd,bhijkd->bhijk", q, kw)
        bias = self.rpb.flatten(1)[:, self.rel_idx.flatten()]                      # h, k*k
        attn = attn + bias[None, :, None, None, :]
        attn = attn.masked_fill(valid == 0, float("-inf")).softmax(dim=-1)
        out = torch.einsum("bhijk,bhijkd->bhijd", attn, vw)
        return self.proj(out.permute(0, 2, 3, 1, 4).reshape(B, H, W, C))


def get_inputs():
    return [torch.randn(8, 28, 28, 128)]


def get_init_inputs():
    return [128, 4, 7, 2]
