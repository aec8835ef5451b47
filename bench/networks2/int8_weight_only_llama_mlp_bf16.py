"""A LLaMA FFN sub-block quantised weight-only to int8 (gpt-fast's WeightOnlyInt8Linear): bf16
activations, int8 weights as buffers with a bf16 scale per output channel; forward is
F.linear(x, W.to(bf16)) * scales. RMSNorm (computed in fp32, cast back) before it, SwiGLU, the
residual. A decode-ish batch of 512 tokens, LLaMA-7B-like widths cut to 2048/5632."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class WeightOnlyInt8Linear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        w = torch.randn(out_features, in_features) * in_features ** -0.5
        scales = w.abs().amax(dim=1) / 127.0
        self.register_buffer("weight", torch.round(w / scales[:, None]).clamp(-128, 127).to(torch.int8))
        self.register_buffer("scales", scales.to(torch.bfloat16))

    def forward(self, input):
        return F.linear(input, self.weight.to(dtype=input.dtype)) * self.scales


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


class Model(nn.Module):
    def __init__(self, dim=2048, hidden=5632):
        super().__init__()
        self.ffn_norm = RMSNorm(dim)
        self.w1 = WeightOnlyInt8Linear(dim, hidden)
        self.w3 = WeightOnlyInt8Linear(dim, hidden)
        self.w2 = WeightOnlyInt8Linear(hidden, dim)
        self.to(torch.bfloat16)

    def forward(self, x):
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


batch_size = 4
seq_len = 128
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return [dim, 5632]
