import torch
import torch.nn as nn

def fixed_pos_embedding(dim, seq_len, device):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(seq_len, device=device).float(), inv_freq).float()
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)

def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)

def duplicate_interleave(m):
    dim0 = m.shape[0]
    m = m.view(-1, 1)
    m = m.repeat(1, 2)
    return m.view(dim0, -1)

def apply_rotary_pos_emb(x, sincos):
    sin, cos = map(lambda t: duplicate_interleave(t)[None, :, None, :], sincos)
    return (x * cos) + (rotate_every_two(x) * sin)

class Model(nn.Module):
    """GPT-J attention: interleaved (every-two) rotary on the first rotary_dim of each head only (partial rotary, rest concatenated back), causal mask from a registered tril buffer via torch.where with a min-value tensor, fp32 softmax."""
    def __init__(self, d=128, h=4, rotary_dim=16, max_pos=128):
        super().__init__()
        self.h, self.hd, self.rd = h, d // h, rotary_dim
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.out_proj = nn.Linear(d, d, bias=False)
        self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool)).view(1, 1, max_pos, max_pos))
        self.register_buffer("masked_bias", torch.tensor(-1e9))

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.hd)
        k = self.k_proj(x).view(B, T, self.h, self.hd)
        v = self.v_proj(x).view(B, T, self.h, self.hd).permute(0, 2, 1, 3)
        k_rot, k_pass = k[:, :, :, : self.rd], k[:, :, :, self.rd:]
        q_rot, q_pass = q[:, :, :, : self.rd], q[:, :, :, self.rd:]
        sincos = fixed_pos_embedding(self.rd, T, x.device)
        k = torch.cat([apply_rotary_pos_emb(k_rot, sincos), k_pass], dim=-1).permute(0, 2, 1, 3)
        q = torch.cat([apply_rotary_pos_emb(q_rot, sincos), q_pass], dim=-1).permute(0, 2, 1, 3)
        causal = self.bias[:, :, :T, :T]
        w = torch.matmul(q.float(), k.float().transpose(-1, -2))
        w = torch.where(causal, w, self.masked_bias.to(w.dtype)) / (self.hd ** 0.5)
        w = nn.functional.softmax(w, dim=-1).to(v.dtype)
        y = torch.matmul(w, v).permute(0, 2, 1, 3).reshape(B, T, -1)
        return self.out_proj(y)

def get_inputs():
    return [torch.randn(2, 64, 128)]

def get_init_inputs():
    return [128, 4, 16, 128]
