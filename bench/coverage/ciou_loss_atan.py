import math
import torch
import torch.nn as nn


def bbox_iou_ciou(box1, box2, eps=1e-7):
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
    b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
    b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp_(0) * (b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)).clamp_(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
    ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
    c2 = cw.pow(2) + ch.pow(2) + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow(2) + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow(2)) / 4
    v = (4 / math.pi ** 2) * ((w2 / h2).atan() - (w1 / h1).atan()).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


class Model(nn.Module):
    """Ultralytics v8 BboxLoss core: predicted xywh boxes (sigmoid/exp decoding of raw outputs), CIoU via chunk(4, -1),
    minimum/maximum, in-place clamp_, atan aspect-ratio term with alpha under torch.no_grad, weighted by a target
    score sum over classes and a foreground mask, normalised by the total target score."""
    def __init__(self, n_cls=80):
        super().__init__()
        self.n_cls = n_cls

    def forward(self, raw, target_boxes, target_scores, fg_mask):
        xy = raw[..., :2].sigmoid() * 2
        wh = raw[..., 2:4].exp()
        pred = torch.cat([xy, wh], -1)
        weight = target_scores.sum(-1) * fg_mask                                   # B A
        iou = bbox_iou_ciou(pred, target_boxes).squeeze(-1)
        return ((1.0 - iou) * weight).sum() / target_scores.sum().clamp(min=1)


def get_inputs():
    B, A = 16, 8400
    tb = torch.cat([torch.rand(B, A, 2) * 2, torch.rand(B, A, 2) * 2 + 0.1], -1)
    return [torch.randn(B, A, 4) * 0.5, tb, torch.rand(B, A, 80) * 0.1, (torch.rand(B, A) > 0.9).float()]


def get_init_inputs():
    return [80]
