import torch
import torch.nn as nn
import torch.nn.functional as F

class Scale(nn.Module):
    def __init__(self, v=1.0):
        super().__init__(); self.scale = nn.Parameter(torch.tensor(v, dtype=torch.float32))
    def forward(self, x):
        return x * self.scale

class Model(nn.Module):
    """FCOS head on one level: shared GN+ReLU towers, cls logits, exp(scale*reg) ltrb distances, centerness target from ltrb."""
    def __init__(self, c=128, num_classes=80):
        super().__init__()
        def tower():
            layers = []
            for _ in range(2):
                layers += [nn.Conv2d(c, c, 3, padding=1), nn.GroupNorm(32, c), nn.ReLU()]
            return nn.Sequential(*layers)
        self.cls_tower, self.bbox_tower = tower(), tower()
        self.cls_logits = nn.Conv2d(c, num_classes, 3, padding=1)
        self.bbox_pred = nn.Conv2d(c, 4, 3, padding=1)
        self.centerness = nn.Conv2d(c, 1, 3, padding=1)
        self.scale = Scale(1.0)
    def forward(self, feat):
        cls = self.cls_logits(self.cls_tower(feat))
        bt = self.bbox_tower(feat)
        reg = torch.exp(self.scale(self.bbox_pred(bt)))
        ctr = self.centerness(bt)
        l, t, r, b = reg.unbind(1)
        ctr_target = torch.sqrt((torch.min(l, r) / torch.max(l, r)) * (torch.min(t, b) / torch.max(t, b)))
        score = torch.sigmoid(cls) * torch.sigmoid(ctr)
        return score.sqrt(), reg, ctr_target

def get_inputs():
    return [torch.randn(2, 128, 32, 32)]

def get_init_inputs():
    return [128, 80]
