import torch
import torch.nn as nn

def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise_distance = -xx - inner - xx.transpose(2, 1)
    return pairwise_distance.topk(k=k, dim=-1)[1]

def get_graph_feature(x, k):
    batch_size, num_dims, num_points = x.size()
    idx = knn(x, k)
    idx_base = torch.arange(0, batch_size, device=x.device).view(-1, 1, 1) * num_points
    idx = (idx + idx_base).view(-1)
    x = x.transpose(2, 1).contiguous()
    feature = x.view(batch_size * num_points, -1)[idx, :]
    feature = feature.view(batch_size, num_points, k, num_dims)
    x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
    return torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()

class Model(nn.Module):
    """DGCNN EdgeConv x2 as in the reference code: knn by topk on -||xi-xj||^2, flat index gather with idx_base, edge features (xj - xi, xi), Conv2d+BN(eval)+LeakyReLU, max over k, global max pool."""
    def __init__(self, k=10, emb=64):
        super().__init__()
        self.k = k
        self.conv1 = nn.Sequential(nn.Conv2d(6, 64, 1, bias=False), nn.BatchNorm2d(64), nn.LeakyReLU(0.2))
        self.conv2 = nn.Sequential(nn.Conv2d(128, 64, 1, bias=False), nn.BatchNorm2d(64), nn.LeakyReLU(0.2))
        self.conv3 = nn.Sequential(nn.Conv1d(128, emb, 1, bias=False), nn.BatchNorm1d(emb), nn.LeakyReLU(0.2))
        self.eval()

    def forward(self, x):
        x1 = self.conv1(get_graph_feature(x, self.k)).max(dim=-1, keepdim=False)[0]
        x2 = self.conv2(get_graph_feature(x1, self.k)).max(dim=-1, keepdim=False)[0]
        x = self.conv3(torch.cat((x1, x2), dim=1))
        return x.max(dim=-1)[0]

def get_inputs():
    return [torch.randn(2, 3, 256)]

def get_init_inputs():
    return [10, 64]
