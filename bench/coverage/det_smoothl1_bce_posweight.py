import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """RPN-style loss: smooth L1 (beta=1/9) on box deltas weighted by a positive mask, BCE-with-logits objectness with pos_weight, normalised by num positives."""
    def __init__(self, beta=1.0 / 9, pos_weight=2.0):
        super().__init__()
        self.beta = beta
        self.register_buffer("pos_weight", torch.tensor([pos_weight]))
    def forward(self, pred_deltas, target_deltas, objectness, labels):
        pos = (labels > 0.5).to(pred_deltas.dtype)
        box = F.smooth_l1_loss(pred_deltas, target_deltas, beta=self.beta, reduction="none").sum(-1)
        num_pos = pos.sum().clamp(min=1.0)
        box_loss = (box * pos).sum() / num_pos
        obj_loss = F.binary_cross_entropy_with_logits(objectness, labels, pos_weight=self.pos_weight)
        return box_loss + obj_loss

def get_inputs():
    return [torch.randn(8, 4096, 4), torch.randn(8, 4096, 4), torch.randn(8, 4096), (torch.rand(8, 4096) > 0.9).float()]

def get_init_inputs():
    return [1.0 / 9, 2.0]
