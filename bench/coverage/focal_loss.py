"""torchvision-style sigmoid focal loss: BCE-with-logits (reduction none), p_t, (1-p_t)^gamma, alpha weighting, mean."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, alpha=0.25, gamma=2.0):
        super().__init__()
        self.alpha, self.gamma = alpha, gamma

    def forward(self, inputs, targets):
        p = torch.sigmoid(inputs)
        ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
        p_t = p * targets + (1 - p) * (1 - targets)
        loss = ce * ((1 - p_t) ** self.gamma)
        alpha_t = self.alpha * targets + (1 - self.alpha) * (1 - targets)
        return (alpha_t * loss).mean()


def get_inputs():
    return [torch.randn(8, 4000, 80), (torch.rand(8, 4000, 80) < 0.01).float()]


def get_init_inputs():
    return []
