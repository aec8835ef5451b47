import torch
import torch.nn as nn
import torch.nn.functional as F


def square_distance(src, dst):
    return torch.sum((src[:, :, None] - dst[:, None]) ** 2, dim=-1)


def index_points(points, idx):
    B = points.shape[0]
    view_shape = list(idx.shape)
    view_shape[1:] = [1] * (len(view_shape) - 1)
    repeat_shape = list(idx.shape)
    repeat_shape[0] = 1
    batch_indices = torch.arange(B, dtype=torch.long, device=points.device).view(view_shape).repeat(repeat_shape)
    return points[batch_indices, idx, :]


def farthest_point_sample(xyz, npoint):
    B, N, C = xyz.shape
    centroids = torch.zeros(B, npoint, dtype=torch.long, device=xyz.device)
    distance = torch.ones(B, N, device=xyz.device) * 1e10
    farthest = torch.zeros(B, dtype=torch.long, device=xyz.device)   # deterministic start
    batch_indices = torch.arange(B, dtype=torch.long, device=xyz.device)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch_indices, farthest, :].view(B, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)
        mask = dist < distance
        distance[mask] = dist[mask]
        farthest = torch.max(distance, -1)[1]
    return centroids


def query_ball_point(radius, nsample, xyz, new_xyz):
    B, N, C = xyz.shape
    _, S, _ = new_xyz.shape
    group_idx = torch.arange(N, dtype=torch.long, device=xyz.device).view(1, 1, N).repeat([B, S, 1])
    sqrdists = square_distance(new_xyz, xyz)
    group_idx[sqrdists > radius ** 2] = N
    group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
    group_first = group_idx[:, :, 0].view(B, S, 1).repeat([1, 1, nsample])
    mask = group_idx == N
    group_idx[mask] = group_first[mask]
    return group_idx


class Model(nn.Module):
    """PointNet++ set abstraction (yanx27/Pointnet_Pointnet2_pytorch): farthest point sampling as a Python loop
    with boolean-mask in-place updates, ball query (arange repeat, mask to N, sort, first-index fill), grouping
    with index_points (batch index repeat + advanced indexing), recentred xyz cat features, shared MLP of
    Conv2d 1x1 + BN (eval) + ReLU, max over the neighbourhood."""
    def __init__(self, npoint=128, radius=0.2, nsample=32, in_ch=3, mlp=(64, 64, 128)):
        super().__init__()
        self.npoint, self.radius, self.nsample = npoint, radius, nsample
        layers, last = [], in_ch + 3
        for c in mlp:
            layers += [nn.Conv2d(last, c, 1), nn.BatchNorm2d(c), nn.ReLU()]
            last = c
        self.mlp = nn.Sequential(*layers)
        self.eval()

    def forward(self, xyz, points):
        fps_idx = farthest_point_sample(xyz, self.npoint)
        new_xyz = index_points(xyz, fps_idx)
        idx = query_ball_point(self.radius, self.nsample, xyz, new_xyz)
        grouped_xyz = index_points(xyz, idx) - new_xyz[:, :, None]
        new_points = torch.cat([grouped_xyz, index_points(points, idx)], dim=-1)     # B S K C+3
        new_points = self.mlp(new_points.permute(0, 3, 2, 1))
        return new_xyz, torch.max(new_points, 2)[0]


def get_inputs():
    return [torch.rand(8, 1024, 3), torch.randn(8, 1024, 3)]


def get_init_inputs():
    return [128, 0.2, 32, 3, (64, 64, 128)]
