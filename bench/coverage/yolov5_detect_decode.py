import torch
import torch.nn as nn

class Model(nn.Module):
    """YOLOv5 Detect layer in inference: per-level 1x1 conv, view to (bs, na, no, ny, nx), permute, sigmoid, grid from torch.meshgrid(indexing='ij'), xy = (2s - 0.5 + grid) * stride, wh = (2s)^2 * anchor_grid, concat over levels."""
    def __init__(self, nc=10, ch=(32, 64, 128)):
        super().__init__()
        self.nc, self.no, self.na, self.nl = nc, nc + 5, 3, len(ch)
        anchors = torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]], dtype=torch.float32)
        self.register_buffer("anchors", anchors.view(self.nl, -1, 2))
        self.stride = [8, 16, 32]
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)

    def _make_grid(self, nx, ny, i, device):
        yv, xv = torch.meshgrid(torch.arange(ny, device=device), torch.arange(nx, device=device), indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(1, self.na, ny, nx, 2).float()
        anchor_grid = self.anchors[i].view(1, self.na, 1, 1, 2).expand(1, self.na, ny, nx, 2)
        return grid, anchor_grid

    def forward(self, x0, x1, x2):
        z = []
        for i, x in enumerate((x0, x1, x2)):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            grid, anchor_grid = self._make_grid(nx, ny, i, x.device)
            y = x.sigmoid()
            xy, wh, conf = y.split((2, 2, self.nc + 1), 4)
            xy = (xy * 2 - 0.5 + grid) * self.stride[i]
            wh = (wh * 2) ** 2 * anchor_grid
            y = torch.cat((xy, wh, conf), 4)
            z.append(y.view(bs, self.na * nx * ny, self.no))
        return torch.cat(z, 1)

def get_inputs():
    return [torch.randn(2, 32, 32, 32), torch.randn(2, 64, 16, 16), torch.randn(2, 128, 8, 8)]

def get_init_inputs():
    return [10, (32, 64, 128)]
