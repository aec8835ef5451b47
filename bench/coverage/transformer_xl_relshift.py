import torch
import torch.nn as nn

class Model(nn.Module):
    """Transformer-XL relative multi-head attention: memory concatenated before the segment, sinusoidal relative embeddings computed in forward, r_w_bias / r_r_bias, the _rel_shift trick (zero-pad a column, view, drop a row, view_as), causal mask via torch.triu(ones, diagonal=1 + mlen) masked_fill."""
    def __init__(self, d_model=64, n_head=4, d_head=16):
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.r_w_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.02)
        self.r_r_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.02)
        inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
        self.register_buffer("inv_freq", inv_freq)
        self.scale = 1 / (d_head ** 0.5)

    def _rel_shift(self, x):
        zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1)
        x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
        return x_padded[1:].view_as(x)

    def forward(self, w, mems):
        qlen, bsz = w.size(0), w.size(1)
        mlen = mems.size(0)
        klen = qlen + mlen
        pos_seq = torch.arange(klen - 1, -1, -1.0, device=w.device, dtype=w.dtype)
        sinusoid = torch.ger(pos_seq, self.inv_freq)
        r = torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)
        cat = torch.cat([mems, w], 0)
        w_heads = self.qkv_net(cat)
        r_head_k = self.r_net(r).view(klen, self.n_head, self.d_head)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        w_head_q = w_head_q[-qlen:].view(qlen, bsz, self.n_head, self.d_head)
        w_head_k = w_head_k.view(klen, bsz, self.n_head, self.d_head)
        w_head_v = w_head_v.view(klen, bsz, self.n_head, self.d_head)
        AC = torch.einsum("ibnd,jbnd->ijbn", (w_head_q + self.r_w_bias, w_head_k))
        BD = self._rel_shift(torch.einsum("ibnd,jnd->ijbn", (w_head_q + self.r_r_bias, r_head_k)))
        attn_score = (AC + BD) * self.scale
        mask = torch.triu(w.new_ones(qlen, klen), diagonal=1 + mlen).bool()[:, :, None, None]
        attn_score = attn_score.float().masked_fill(mask, -float("inf")).type_as(attn_score)
        attn_prob = torch.softmax(attn_score, dim=1)
        attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))
        attn_vec = attn_vec.contiguous().view(qlen, bsz, self.n_head * self.d_head)
        return self.layer_norm(w + self.o_net(attn_vec))

def get_inputs():
    return [torch.randn(32, 4, 64), torch.randn(16, 4, 64)]

def get_init_inputs():
    return [64, 4, 16]
