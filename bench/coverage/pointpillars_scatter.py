import torch
import torch.nn as nn

class Model(nn.Module):
    """PointPillars: PFN (Linear, BatchNorm1d eval, ReLU, max over points) then the pseudo-image scatter: canvas[:, y * nx + x] = pillar_features.t() (index_put with int64 coordinates), reshape to BEV image, one conv."""
    def __init__(self, cin=9, c=64, nx=32, ny=32):
        super().__init__()
        self.c, self.nx, self.ny = c, nx, ny
        self.linear = nn.Linear(cin, c, bias=False)
        self.norm = nn.BatchNorm1d(c, eps=1e-3, momentum=0.01)
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.eval()

    def forward(self, pillars, coords):
        x = self.linear(pillars)                      # P, N, C
        x = self.norm(x.permute(0, 2, 1)).permute(0, 2, 1)
        x = torch.relu(x)
        feats = torch.max(x, dim=1)[0]                # P, C
        canvas = torch.zeros(self.c, self.nx * self.ny, dtype=feats.dtype, device=feats.device)
        indices = coords[:, 0] * self.nx + coords[:, 1]
        canvas[:, indices] = feats.t()
        bev = canvas.view(1, self.c, self.ny, self.nx)
        return torch.relu(self.conv(bev))

def get_inputs():
    perm = torch.randperm(32 * 32)[:200]
    coords = torch.stack([perm // 32, perm % 32], dim=1)
    return [torch.randn(200, 16, 9), coords]

def get_init_inputs():
    return [9, 64, 32, 32]
