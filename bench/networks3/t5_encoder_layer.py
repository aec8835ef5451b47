"""T5 v1.1 encoder layer (HF transformers, modeling_t5.py, t5-v1_1-small sizes): T5LayerNorm (RMS,
no mean, no bias), self-attention without scaling plus a relative position bias (bidirectional
log-spaced buckets from torch.arange, an nn.Embedding per head), gated-GELU (tanh) FFN, residuals."""
import math

import torch
import torch.nn as nn


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    num_buckets //= 2  # bidirectional
    relative_buckets = (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, relative_position_if_large)


class T5Attention(nn.Module):
    def __init__(self, d_model, d_kv, n_heads, num_buckets=32, max_distance=128):
        super().__init__()
        self.n_heads, self.key_value_proj_dim = n_heads, d_kv
        self.num_buckets, self.max_distance = num_buckets, max_distance
        inner_dim = n_heads * d_kv
        self.q = nn.Linear(d_model, inner_dim, bias=False)
        self.k = nn.Linear(d_model, inner_dim, bias=False)
        self.v = nn.Linear(d_model, inner_dim, bias=False)
        self.o = nn.Linear(inner_dim, d_model, bias=False)
        self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    def compute_bias(self, query_length, key_length, device):
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        bucket = relative_position_bucket(memory_position - context_position, self.num_buckets, self.max_distance)
        values = self.relative_attention_bias(bucket)  # (query_length, key_length, n_heads)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden_states):
        batch_size, seq_length = hidden_states.shape[:2]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        q, k, v = shape(self.q(hidden_states)), shape(self.k(hidden_states)), shape(self.v(hidden_states))
        scores = torch.matmul(q, k.transpose(3, 2))
        scores += self.compute_bias(seq_length, seq_length, scores.device)
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()
        return self.o(attn_output.view(batch_size, -1, self.n_heads * self.key_value_proj_dim))


class Model(nn.Module):
    def __init__(self, d_model=512, d_kv=64, num_heads=6, d_ff=1024):
        super().__init__()
        self.attn_layer_norm = T5LayerNorm(d_model)
        self.SelfAttention = T5Attention(d_model, d_kv, num_heads)
        self.ff_layer_norm = T5LayerNorm(d_model)
        self.wi_0 = nn.Linear(d_model, d_ff, bias=False)
        self.wi_1 = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.SelfAttention(self.attn_layer_norm(hidden_states))
        h = self.ff_layer_norm(hidden_states)
        h = self.act(self.wi_0(h)) * self.wi_1(h)
        return hidden_states + self.wo(h)


batch_size = 8
seq_len = 512
d_model = 512


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, 64, 6, 1024]
