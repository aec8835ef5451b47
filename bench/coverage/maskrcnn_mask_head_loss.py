import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Mask R-CNN mask head on pooled RoI features: 4 conv3x3+ReLU, ConvTranspose2d 2x, 1x1 per-class mask logits; the mask of each RoI's gt class is picked by advanced indexing [arange, labels] and scored with BCE-with-logits."""
    def __init__(self, c=64, num_classes=8):
        super().__init__()
        layers = []
        for _ in range(4):
            layers += [nn.Conv2d(c, c, 3, padding=1), nn.ReLU(inplace=True)]
        self.fcn = nn.Sequential(*layers)
        self.deconv = nn.ConvTranspose2d(c, c, 2, stride=2)
        self.predictor = nn.Conv2d(c, num_classes, 1)

    def forward(self, roi_feats, labels, mask_targets):
        x = self.fcn(roi_feats)
        x = F.relu(self.deconv(x))
        logits = self.predictor(x)
        idx = torch.arange(labels.shape[0], device=labels.device)
        picked = logits[idx, labels]
        return F.binary_cross_entropy_with_logits(picked, mask_targets)

def get_inputs():
    return [torch.randn(16, 64, 14, 14), torch.randint(0, 8, (16,)), torch.rand(16, 28, 28).round()]

def get_init_inputs():
    return [64, 8]
