import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d=512, emb=128, margin=0.2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, emb))
        self.loss = nn.TripletMarginLoss(margin=margin, p=2)
    def forward(self, a, p, n):
        ea = nn.functional.normalize(self.net(a), dim=1)
        ep = nn.functional.normalize(self.net(p), dim=1)
        en = nn.functional.normalize(self.net(n), dim=1)
        return self.loss(ea, ep, en)

def get_inputs():
    return [torch.randn(128, 512), torch.randn(128, 512), torch.randn(128, 512)]

def get_init_inputs():
    return [512, 128, 0.2]
