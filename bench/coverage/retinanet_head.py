import math
import torch
import torch.nn as nn

class Model(nn.Module):
    """RetinaNet head shared over 3 FPN levels: 4x (conv3x3, ReLU) towers for class and box, prior-prob bias init, outputs permuted to (N, HWA, K) and concatenated across levels."""
    def __init__(self, c=64, num_anchors=9, num_classes=20):
        super().__init__()
        self.A, self.K = num_anchors, num_classes
        def tower():
            layers = []
            for _ in range(4):
                layers += [nn.Conv2d(c, c, 3, padding=1), nn.ReLU(inplace=True)]
            return nn.Sequential(*layers)
        self.cls_tower, self.box_tower = tower(), tower()
        self.cls_logits = nn.Conv2d(c, num_anchors * num_classes, 3, padding=1)
        self.bbox_pred = nn.Conv2d(c, num_anchors * 4, 3, padding=1)
        nn.init.constant_(self.cls_logits.bias, -math.log((1 - 0.01) / 0.01))

    def forward(self, p3, p4, p5):
        cls_out, box_out = [], []
        for f in (p3, p4, p5):
            N, _, H, W = f.shape
            c = self.cls_logits(self.cls_tower(f))
            b = self.bbox_pred(self.box_tower(f))
            c = c.view(N, self.A, self.K, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, self.K)
            b = b.view(N, self.A, 4, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, 4)
            cls_out.append(c)
            box_out.append(b)
        return torch.cat(cls_out, dim=1).sigmoid(), torch.cat(box_out, dim=1)

def get_inputs():
    return [torch.randn(2, 64, 32, 32), torch.randn(2, 64, 16, 16), torch.randn(2, 64, 8, 8)]

def get_init_inputs():
    return [64, 9, 20]
