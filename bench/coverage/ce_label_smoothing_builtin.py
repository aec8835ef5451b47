"""nn.CrossEntropyLoss with label_smoothing=0.1 and ignore_index on int64 token targets over a (B*T, V) LM head output."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=-100)

    def forward(self, logits, target):
        return self.loss(logits.view(-1, logits.size(-1)), target.view(-1))


def get_inputs():
    t = torch.randint(0, 4000, (8, 128))
    t[:, -8:] = -100
    return [torch.randn(8, 128, 4000), t]


def get_init_inputs():
    return []
