"""xLSTM's mLSTM cell in its parallel (training) form, as the reference `parallel_stabilized_simple`
writes it: log-sigmoid forget gates cumulated with cumsum into a decay matrix (causal, -inf above the
diagonal), input-gate preactivations added, a row-wise max for stability, exp, a normaliser
max(|sum|, exp(-max)), then a per-head group norm and an output gate, inside the pre-up-projection
block (up-projection, causal conv4 + SiLU for q/k, learnable skip, down-projection)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def parallel_stabilized_simple(queries, keys, values, igate_preact, fgate_preact, eps=1e-6):
    B, NH, S, DH = queries.shape
    _dtype, _device = queries.dtype, queries.device
    log_fgates = F.logsigmoid(fgate_preact)  # (B, NH, S, 1)
    ltr = torch.tril(torch.ones((S, S), dtype=torch.bool, device=_device))
    log_fgates_cumsum = torch.cat(
        [torch.zeros((B, NH, 1, 1), dtype=_dtype, device=_device), torch.cumsum(log_fgates, dim=-2)], dim=-2)
    rep_log_fgates_cumsum = log_fgates_cumsum.repeat(1, 1, 1, S + 1)
    _log_fg_matrix = rep_log_fgates_cumsum - rep_log_fgates_cumsum.transpose(-2, -1)
    log_fg_matrix = torch.where(ltr, _log_fg_matrix[:, :, 1:, 1:], -float("inf"))
    log_D_matrix = log_fg_matrix + igate_preact.transpose(-2, -1)
    max_log_D, _ = torch.max(log_D_matrix, dim=-1, keepdim=True)
    log_D_matrix_stabilized = log_D_matrix - max_log_D
    D_matrix = torch.exp(log_D_matrix_stabilized)
    keys_scaled = keys / math.sqrt(DH)
    qk_matrix = queries @ keys_scaled.transpose(-2, -1)
    C_matrix = qk_matrix * D_matrix
    normalizer = torch.maximum(C_matrix.sum(dim=-1, keepdim=True).abs(), torch.exp(-max_log_D))
    C_matrix_normalized = C_matrix / (normalizer + eps)
    return C_matrix_normalized @ values


class CausalConv1d(nn.Module):
    def __init__(self, dim, k=4):
        super().__init__()
        self.pad = k - 1
        self.conv = nn.Conv1d(dim, dim, k, groups=dim)

    def forward(self, x):  # (B, S, D)
        x = F.pad(x.transpose(1, 2), (self.pad, 0))
        return self.conv(x).transpose(1, 2)


class Model(nn.Module):
    def __init__(self, embedding_dim=512, num_heads=4, proj_factor=2.0):
        super().__init__()
        inner = int(embedding_dim * proj_factor)
        self.nh = num_heads
        self.norm = nn.LayerNorm(embedding_dim)
        self.proj_up = nn.Linear(embedding_dim, 2 * inner, bias=False)
        self.conv1d = CausalConv1d(inner)
        self.q_proj = nn.Linear(inner, inner, bias=False)
        self.k_proj = nn.Linear(inner, inner, bias=False)
        self.v_proj = nn.Linear(inner, inner, bias=False)
        self.igate = nn.Linear(3 * inner, num_heads)
        self.fgate = nn.Linear(3 * inner, num_heads)
        with torch.no_grad():
            self.fgate.bias.copy_(torch.linspace(3.0, 6.0, num_heads))
            self.igate.bias.normal_(0, 0.1)
        self.outnorm_weight = nn.Parameter(torch.ones(inner))
        self.learnable_skip = nn.Parameter(torch.ones(inner))
        self.proj_down = nn.Linear(inner, embedding_dim, bias=False)

    def forward(self, x):
        B, S, _ = x.shape
        x_inner = self.proj_up(self.norm(x))
        x_mlstm, z = torch.split(x_inner, split_size_or_sections=x_inner.shape[-1] // 2, dim=-1)
        x_conv_act = F.silu(self.conv1d(x_mlstm))
        q, k, v = self.q_proj(x_conv_act), self.k_proj(x_conv_act), self.v_proj(x_mlstm)
        gate_in = torch.cat([q, k, v], dim=-1)
        ig = self.igate(gate_in).transpose(-1, -2).unsqueeze(-1)  # (B, NH, S, 1)
        fg = self.fgate(gate_in).transpose(-1, -2).unsqueeze(-1)
        heads = lambda t: t.view(B, S, self.nh, -1).transpose(1, 2)  # noqa: E731
        h = parallel_stabilized_simple(heads(q), heads(k), heads(v), ig, fg)  # (B, NH, S, DH)
        # multi-head group norm (per head layer norm without bias), as MultiHeadLayerNorm
        h = F.group_norm(h.transpose(1, 2).reshape(B * S, -1), num_groups=self.nh, eps=1e-5)
        h = h.view(B, S, -1) * self.outnorm_weight
        h_skip = h + self.learnable_skip * x_conv_act
        return x + self.proj_down(h_skip * F.silu(z))


batch_size = 8
seq_len = 512
embedding_dim = 512


def get_inputs():
    return [torch.randn(batch_size, seq_len, embedding_dim)]


def get_init_inputs():
    return [embedding_dim, 4, 2.0]
