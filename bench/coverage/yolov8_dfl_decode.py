import torch
import torch.nn as nn


class DFL(nn.Module):
    def __init__(self, c1=16):
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        x = torch.arange(c1, dtype=torch.float)
        self.conv.weight.data[:] = nn.Parameter(x.view(1, c1, 1, 1))
        self.c1 = c1

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(feats, strides, offset=0.5):
    anchor_points, stride_tensor = [], []
    dtype, device = feats[0].dtype, feats[0].device
    for i, stride in enumerate(strides):
        _, _, h, w = feats[i].shape
        sx = torch.arange(end=w, device=device, dtype=dtype) + offset
        sy = torch.arange(end=h, device=device, dtype=dtype) + offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        anchor_points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_tensor.append(torch.full((h * w, 1), stride, dtype=dtype, device=device))
    return torch.cat(anchor_points), torch.cat(stride_tensor)


def dist2bbox(distance, anchor_points, xywh=True, dim=-1):
    lt, rb = distance.chunk(2, dim)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    if xywh:
        c_xy = (x1y1 + x2y2) / 2
        wh = x2y2 - x1y1
        return torch.cat((c_xy, wh), dim)
    return torch.cat((x1y1, x2y2), dim)


class Model(nn.Module):
    """Ultralytics YOLOv8 Detect head in inference: per level two conv branches (Conv+BN+SiLU x2, 1x1 to 4*reg_max box
    logits and nc class logits), cat and flatten across levels, split, DFL (softmax over 16 bins then a frozen 1x1 conv
    whose weight is arange), make_anchors from meshgrid, dist2bbox to xywh times strides, sigmoid scores, cat."""
    def __init__(self, nc=80, ch=(64, 128), reg_max=16, strides=(8.0, 16.0)):
        super().__init__()
        self.nc, self.reg_max, self.no, self.strides = nc, reg_max, nc + 4 * reg_max, strides
        c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
        def cbs(ci, co):
            return nn.Sequential(nn.Conv2d(ci, co, 3, 1, 1, bias=False), nn.BatchNorm2d(co), nn.SiLU())
        self.cv2 = nn.ModuleList(nn.Sequential(cbs(x, c2), cbs(c2, c2), nn.Conv2d(c2, 4 * reg_max, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(cbs(x, c3), cbs(c3, c3), nn.Conv2d(c3, nc, 1)) for x in ch)
        self.dfl = DFL(reg_max)
        self.eval()

    def forward(self, p3, p4):
        x = [p3, p4]
        for i in range(len(x)):
            x[i] = torch.cat((self.cv2[i](x[i]), self.cv3[i](x[i])), 1)
        shape = x[0].shape
        x_cat = torch.cat([xi.view(shape[0], self.no, -1) for xi in x], 2)
        anchors, strides = (t.transpose(0, 1) for t in make_anchors(x, self.strides, 0.5))
        box, cls = x_cat.split((self.reg_max * 4, self.nc), 1)
        dbox = dist2bbox(self.dfl(box), anchors.unsqueeze(0), xywh=True, dim=1) * strides
        return torch.cat((dbox, cls.sigmoid()), 1)


def get_inputs():
    return [torch.randn(8, 64, 40, 40), torch.randn(8, 128, 20, 20)]


def get_init_inputs():
    return [80, (64, 128), 16, (8.0, 16.0)]
