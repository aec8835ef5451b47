"""PointNet++-style set abstraction without FPS/ball query: centroids are every 4th point, k nearest neighbours via torch.cdist + topk(largest=False), grouped by gather, recentred, shared MLP (Conv2d 1x1 + BN + ReLU), max over neighbours."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k=16, stride=4, c_in=32, c_out=128):
        super().__init__()
        self.k, self.stride = k, stride
        self.mlp = nn.Sequential(
            nn.Conv2d(3 + c_in, 64, 1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, c_out, 1), nn.BatchNorm2d(c_out), nn.ReLU(),
        )

    def forward(self, xyz, feats):
        b, n, _ = xyz.shape
        centers = xyz[:, :: self.stride, :]
        d = torch.cdist(centers, xyz)
        idx = d.topk(self.k, dim=-1, largest=False).indices
        m = idx.shape[1]
        flat = idx.reshape(b, m * self.k, 1)
        g_xyz = torch.gather(xyz, 1, flat.expand(-1, -1, 3)).view(b, m, self.k, 3) - centers.unsqueeze(2)
        g_f = torch.gather(feats, 1, flat.expand(-1, -1, feats.shape[-1])).view(b, m, self.k, -1)
        g = torch.cat([g_xyz, g_f], dim=-1).permute(0, 3, 1, 2)
        return centers, self.mlp(g).max(dim=-1).values


def get_inputs():
    return [torch.randn(8, 1024, 3), torch.randn(8, 1024, 32)]


def get_init_inputs():
    return []
