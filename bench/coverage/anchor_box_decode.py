import math
import torch
import torch.nn as nn

class Model(nn.Module):
    """torchvision BoxCoder.decode: anchors + (dx,dy,dw,dh)/weights, clamp dw/dh to log(1000/16), exp, to xyxy, clip to image."""
    def __init__(self, img_h=512, img_w=512):
        super().__init__()
        self.weights = (10.0, 10.0, 5.0, 5.0)
        self.clamp = math.log(1000.0 / 16)
        self.img_h, self.img_w = img_h, img_w
    def forward(self, rel_codes, anchors):
        widths = anchors[:, 2] - anchors[:, 0]
        heights = anchors[:, 3] - anchors[:, 1]
        ctr_x = anchors[:, 0] + 0.5 * widths
        ctr_y = anchors[:, 1] + 0.5 * heights
        wx, wy, ww, wh = self.weights
        dx = rel_codes[:, 0::4] / wx
        dy = rel_codes[:, 1::4] / wy
        dw = torch.clamp(rel_codes[:, 2::4] / ww, max=self.clamp)
        dh = torch.clamp(rel_codes[:, 3::4] / wh, max=self.clamp)
        pcx = dx * widths[:, None] + ctr_x[:, None]
        pcy = dy * heights[:, None] + ctr_y[:, None]
        pw = torch.exp(dw) * widths[:, None]
        ph = torch.exp(dh) * heights[:, None]
        c_to_c_h = torch.tensor(0.5, dtype=pcy.dtype, device=ph.device) * ph
        c_to_c_w = torch.tensor(0.5, dtype=pcx.dtype, device=pw.device) * pw
        boxes = torch.stack((pcx - c_to_c_w, pcy - c_to_c_h, pcx + c_to_c_w, pcy + c_to_c_h), dim=2).flatten(1)
        boxes = boxes.reshape(-1, 4)
        x = boxes[:, 0::2].clamp(min=0, max=self.img_w)
        y = boxes[:, 1::2].clamp(min=0, max=self.img_h)
        return torch.stack((x, y), dim=-1).reshape(boxes.shape[0], -1)[:, [0, 2, 1, 3]]

def get_inputs():
    a = torch.rand(20000, 2) * 480
    wh = torch.rand(20000, 2) * 100 + 8
    return [torch.randn(20000, 4) * 0.5, torch.cat([a, a + wh], dim=1)]

def get_init_inputs():
    return [512, 512]
