import torch
import torch.nn as nn

class Model(nn.Module):
    """Ops whose output size depends on values, as users write them in losses: loss over positives only via boolean indexing pred[mask], torch.masked_select, torch.unique(return_counts) to average per class, torch.nonzero to pick anchors, torch.any / torch.all guards folded into torch.where."""
    def __init__(self, d=32, C=5):
        super().__init__()
        self.fc = nn.Linear(d, C)

    def forward(self, x, labels, valid):
        logits = self.fc(x)
        pos = logits[valid]
        sel = torch.masked_select(logits[:, 0], valid)
        classes, counts = torch.unique(labels, return_counts=True)
        per_class = torch.zeros(logits.size(1), device=x.device).index_add_(0, labels, logits.gather(1, labels[:, None]).squeeze(1))
        mean_pc = per_class[classes] / counts
        anchors = torch.nonzero(logits[:, 1] > 0).squeeze(1)
        picked = logits[anchors, 1].sum()
        any_pos = torch.any(valid)
        all_pos = torch.all(labels >= 0)
        base = pos.pow(2).mean() + sel.mean() + mean_pc.mean() + picked
        return torch.where(any_pos & all_pos, base, torch.zeros_like(base))

def get_inputs():
    return [torch.randn(32, 32), torch.randint(0, 5, (32,)), torch.rand(32) > 0.5]

def get_init_inputs():
    return [32, 5]
