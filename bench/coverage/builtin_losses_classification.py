import torch
import torch.nn as nn

class Model(nn.Module):
    """Built-in classification losses: NLLLoss with class weights and ignore_index, BCELoss with per-element weight on sigmoid outputs, MultiLabelSoftMarginLoss, MultiMarginLoss(p=1, margin), MultiLabelMarginLoss with -1-terminated targets, CrossEntropyLoss with probability (soft) targets."""
    def __init__(self, d=32, C=6):
        super().__init__()
        self.net = nn.Linear(d, C)
        self.register_buffer("cw", torch.linspace(0.5, 2.0, C))
        self.nll = nn.NLLLoss(weight=self.cw, ignore_index=-1)
        self.bce = nn.BCELoss()
        self.mlsm = nn.MultiLabelSoftMarginLoss()
        self.mm = nn.MultiMarginLoss(p=1, margin=1.0)
        self.mlm = nn.MultiLabelMarginLoss()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, x, y, multi, ml_targets, soft):
        z = self.net(x)
        l = self.nll(torch.log_softmax(z, 1), y) + self.bce(torch.sigmoid(z), multi)
        l = l + self.mlsm(z, multi) + self.mm(z, y.clamp(min=0)) + self.mlm(z, ml_targets)
        return l + self.ce(z, soft)

def get_inputs():
    y = torch.randint(0, 6, (32,))
    y[::7] = -1
    mlt = torch.full((32, 6), -1, dtype=torch.long)
    mlt[:, 0] = torch.randint(0, 6, (32,))
    mlt[:, 1] = (mlt[:, 0] + 1) % 6
    return [torch.randn(32, 32), y, torch.randint(0, 2, (32, 6)).float(), mlt, torch.softmax(torch.randn(32, 6), 1)]

def get_init_inputs():
    return [32, 6]
