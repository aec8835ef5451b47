import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def parallel_stabilized_simple(queries, keys, values, igate_preact, fgate_preact, eps=1e-6):
    B, NH, S, DH = queries.shape
    ltr = torch.tril(torch.ones((S, S), dtype=torch.bool, device=queries.device))
    log_fgates = F.logsigmoid(fgate_preact)                                           # B NH S 1
    log_fgates_cumsum = torch.cat([torch.zeros((B, NH, 1, 1), dtype=queries.dtype, device=queries.device),
                                   torch.cumsum(log_fgates, dim=-2)], dim=-2)         # B NH S+1 1
    rep = log_fgates_cumsum.repeat(1, 1, 1, S + 1)
    _log_fg_matrix = rep - rep.transpose(-2, -1)
    log_fg_matrix = torch.where(ltr, _log_fg_matrix[:, :, 1:, 1:], -float("inf"))
    log_D_matrix = log_fg_matrix + igate_preact.transpose(-2, -1)
    max_log_D, _ = torch.max(log_D_matrix, dim=-1, keepdim=True)
    D_matrix = torch.exp(log_D_matrix - max_log_D)
    qk = (queries @ keys.transpose(-2, -1)) / math.sqrt(DH)
    C = qk * D_matrix
    normalizer = torch.maximum(C.sum(dim=-1, keepdim=True).abs(), torch.exp(-max_log_D))
    return (C / (normalizer + eps)) @ values


class Model(nn.Module):
    """xLSTM mLSTM layer, parallel stabilised form (NX-AI reference): up-projection to x and z, causal conv1d + SiLU on
    the q/k branch, headwise q/k/v, input and forget gate pre-activations from cat(q, k, v), log-sigmoid forget gates
    cumsum with a zero row prepended, repeat + transpose difference matrix, torch.where tril, max stabiliser, normaliser
    max(|sum|, exp(-max)), multi-head LayerNorm (GroupNorm), learnable skip, output gate SiLU(z), down-projection."""
    def __init__(self, d=128, heads=4, proj_factor=2, conv_k=4):
        super().__init__()
        inner = proj_factor * d
        self.nh, self.inner = heads, inner
        self.proj_up = nn.Linear(d, 2 * inner)
        self.conv1d = nn.Conv1d(inner, inner, conv_k, groups=inner, padding=conv_k - 1)
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(inner, inner), nn.Linear(inner, inner), nn.Linear(inner, inner)
        self.igate = nn.Linear(3 * inner, heads)
        self.fgate = nn.Linear(3 * inner, heads)
        nn.init.constant_(self.fgate.bias, 3.0)
        self.outnorm = nn.GroupNorm(heads, inner)
        self.learnable_skip = nn.Parameter(torch.ones(inner))
        self.proj_down = nn.Linear(inner, d)

    def forward(self, x):
        B, S, _ = x.shape
        x_m, z = self.proj_up(x).split(self.inner, dim=-1)
        x_c = F.silu(self.conv1d(x_m.transpose(1, 2))[..., :S].transpose(1, 2))
        q, k, v = self.q_proj(x_c), self.k_proj(x_c), self.v_proj(x_m)
        if_in = torch.cat([q, k, v], dim=-1)
        ig = self.igate(if_in).transpose(-1, -2).unsqueeze(-1)                     # B NH S 1
        fg = self.fgate(if_in).transpose(-1, -2).unsqueeze(-1)
        heads = lambda t: t.view(B, S, self.nh, -1).transpose(1, 2)
        h = parallel_stabilized_simple(heads(q), heads(k), heads(v), ig, fg)        # B NH S DH
        h = self.outnorm(h.transpose(1, 2).reshape(B * S, -1)).view(B, S, -1)
        h = (h + self.learnable_skip * x_c) * F.silu(z)
        return self.proj_down(h)


def get_inputs():
    return [torch.randn(8, 256, 128)]


def get_init_inputs():
    return [128, 4, 2, 4]
