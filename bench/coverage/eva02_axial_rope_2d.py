import torch
import torch.nn as nn
import torch.nn.functional as F


def init_t_xy(end_x, end_y):
    t = torch.arange(end_x * end_y, dtype=torch.float32)
    t_x = (t % end_x).float()
    t_y = torch.div(t, end_x, rounding_mode="floor").float()
    return t_x, t_y


def compute_axial_cis(dim, end_x, end_y, theta=10000.0):
    freqs_x = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    freqs_y = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    t_x, t_y = init_t_xy(end_x, end_y)
    freqs_x = torch.outer(t_x, freqs_x)
    freqs_y = torch.outer(t_y, freqs_y)
    freqs_cis_x = torch.polar(torch.ones_like(freqs_x), freqs_x)
    freqs_cis_y = torch.polar(torch.ones_like(freqs_y), freqs_y)
    return torch.cat([freqs_cis_x, freqs_cis_y], dim=-1)


def apply_rotary_enc(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    ndim = xq_.ndim
    shape = [d if i >= ndim - 2 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Model(nn.Module):
    """SAM 2 / EVA-02 style 2D axial RoPE attention: freqs_cis for x and y positions via torch.polar, concatenated
    complex table as a buffer built at init, q/k viewed as complex pairs (view_as_complex), multiplied, view_as_real +
    flatten, separate q/k/v Linear projections, SDPA (no mask), out projection; bf16 activations."""
    def __init__(self, d=256, heads=8, hw=16):
        super().__init__()
        self.h = heads
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)
        self.to(torch.bfloat16)
        # complex64 table (registered after the cast, which would drop the imaginary part)
        self.register_buffer("freqs_cis", compute_axial_cis(d // heads, hw, hw), persistent=False)

    def forward(self, x):
        B, N, C = x.shape
        q = self.q_proj(x).view(B, N, self.h, -1).transpose(1, 2)
        k = self.k_proj(x).view(B, N, self.h, -1).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.h, -1).transpose(1, 2)
        q, k = apply_rotary_enc(q, k, self.freqs_cis)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(o.transpose(1, 2).reshape(B, N, C))


def get_inputs():
    return [torch.randn(16, 256, 256).bfloat16()]


def get_init_inputs():
    return [256, 8, 16]
