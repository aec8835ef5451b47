import torch
import torch.nn as nn

def bipartite_soft_matching(metric, r):
    metric = metric / metric.norm(dim=-1, keepdim=True)
    a, b = metric[..., ::2, :], metric[..., 1::2, :]
    scores = a @ b.transpose(-1, -2)
    scores[..., 0, :] = -float("inf")          # protect cls token
    node_max, node_idx = scores.max(dim=-1)
    edge_idx = node_max.argsort(dim=-1, descending=True)[..., None]
    unm_idx = edge_idx[..., r:, :]
    src_idx = edge_idx[..., :r, :]
    dst_idx = node_idx[..., None].gather(dim=-2, index=src_idx)
    unm_idx = unm_idx.sort(dim=1)[0]

    def merge(x, mode="mean"):
        src, dst = x[..., ::2, :], x[..., 1::2, :]
        n, t1, c = src.shape
        unm = src.gather(dim=-2, index=unm_idx.expand(n, t1 - r, c))
        src = src.gather(dim=-2, index=src_idx.expand(n, r, c))
        dst = dst.scatter_reduce(-2, dst_idx.expand(n, r, c), src, reduce=mode)
        return torch.cat([unm, dst], dim=1)
    return merge

class Model(nn.Module):
    """Token Merging (ToMe) inside a ViT block: attention keys' mean over heads as the metric, bipartite soft matching (cosine scores, cls protected by an in-place -inf row write, max, argsort descending, gather, sort), size-weighted merge with scatter_reduce('sum'), proportional attention with log(size)."""
    def __init__(self, dim=64, heads=4, r=8):
        super().__init__()
        self.h, self.r = heads, r
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, size):
        B, N, C = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * (C // self.h) ** -0.5
        attn = attn + size.log()[:, None, None, :, 0]
        attn = attn.softmax(dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))
        merge = bipartite_soft_matching(k.mean(1), self.r)
        x = merge(x * size, mode="sum")
        size = merge(size, mode="sum")
        x = x / size
        return x + self.mlp(self.norm2(x)), size

def get_inputs():
    return [torch.randn(2, 65, 64), torch.ones(2, 65, 1)]

def get_init_inputs():
    return [64, 4, 8]
