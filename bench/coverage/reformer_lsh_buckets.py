import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Reformer LSH self-attention (one hash round, shared QK): random rotations buffer, buckets = argmax(cat[r, -r]), sort key = bucket * T + position via argsort, gather into sorted order, chunked attention with look-one-back (torch.cat with rolled chunks), self-mask, then unsort with the inverse permutation (argsort of the sort)."""
    def __init__(self, d=64, n_buckets=8, chunk=16):
        super().__init__()
        self.nb, self.chunk = n_buckets, chunk
        self.qk = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(d, d)
        self.register_buffer("rotations", torch.randn(d, n_buckets // 2))

    def forward(self, x):
        B, T, D = x.shape
        qk, v = self.qk(x), self.v(x)
        rotated = torch.einsum("btd,dr->btr", F.normalize(qk, dim=-1), self.rotations)
        buckets = torch.argmax(torch.cat([rotated, -rotated], dim=-1), dim=-1)
        pos = torch.arange(T, device=x.device).expand(B, T)
        sticker = torch.argsort(buckets * T + pos, dim=-1)
        undo = torch.argsort(sticker, dim=-1)
        idx = sticker.unsqueeze(-1).expand(-1, -1, D)
        sqk, sv = qk.gather(1, idx), v.gather(1, idx)
        spos = pos.gather(1, sticker)
        n = T // self.chunk
        bq = sqk.view(B, n, self.chunk, D)
        bk = F.normalize(bq, dim=-1)
        bv = sv.view(B, n, self.chunk, D)
        bp = spos.view(B, n, self.chunk)
        bk = torch.cat([bk, bk.roll(1, dims=1)], dim=2)
        bv = torch.cat([bv, bv.roll(1, dims=1)], dim=2)
        kp = torch.cat([bp, bp.roll(1, dims=1)], dim=2)
        dots = torch.einsum("bnid,bnjd->bnij", bq, bk) * D ** -0.5
        dots = dots.masked_fill(bp.unsqueeze(-1) == kp.unsqueeze(-2), -1e5)
        attn = dots.softmax(dim=-1)
        so = torch.einsum("bnij,bnjd->bnid", attn, bv).reshape(B, T, D)
        o = so.gather(1, undo.unsqueeze(-1).expand(-1, -1, D))
        return self.out(o)

def get_inputs():
    return [torch.randn(2, 64, 64)]

def get_init_inputs():
    return [64, 8, 16]
