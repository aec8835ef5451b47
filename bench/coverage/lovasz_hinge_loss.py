"""Lovasz hinge loss (Berman et al.) per image: signs from binary labels, hinge errors 1 - logits*signs, sorted descending (torch.sort), labels permuted by the sort (gather), Lovasz extension gradient from cumsum of positives/negatives (jaccard, then jaccard[1:] - jaccard[:-1] via cat), dot with relu(errors), mean over the batch."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, logits, labels):
        B = logits.shape[0]
        logits = logits.view(B, -1)
        labels = labels.view(B, -1).float()
        signs = 2.0 * labels - 1.0
        errors = 1.0 - logits * signs
        errors_sorted, perm = torch.sort(errors, dim=1, descending=True)
        gt_sorted = labels.gather(1, perm)
        gts = gt_sorted.sum(1, keepdim=True)
        inter = gts - gt_sorted.cumsum(1)
        union = gts + (1.0 - gt_sorted).cumsum(1)
        jac = 1.0 - inter / union
        grad = torch.cat([jac[:, :1], jac[:, 1:] - jac[:, :-1]], dim=1)
        return (F.relu(errors_sorted) * grad).sum(1).mean()


def get_inputs():
    return [torch.randn(4, 1, 32, 32), (torch.rand(4, 1, 32, 32) > 0.6).long()]


def get_init_inputs():
    return []
