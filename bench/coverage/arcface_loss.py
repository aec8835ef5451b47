import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """ArcFace (insightface PyTorch): embedding backbone (Linear+BN1d eval), cosine = F.linear(normalize(x), normalize(W)), theta via torch.acos(clamp), target logit cos(theta + m) with easy-margin-free threshold fallback via torch.where, one_hot via zeros().scatter_(1, label.view(-1,1).long(), 1), s-scaled logits, cross entropy."""
    def __init__(self, d=128, emb=64, n_classes=100, s=64.0, m=0.5):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(d, emb), nn.BatchNorm1d(emb))
        self.weight = nn.Parameter(torch.randn(n_classes, emb) * 0.01)
        self.s, self.m = s, m
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m
        self.backbone.eval()

    def forward(self, x, label):
        e = self.backbone(x)
        cosine = F.linear(F.normalize(e), F.normalize(self.weight))
        theta = torch.acos(cosine.clamp(-1 + 1e-7, 1 - 1e-7))
        phi = torch.cos(theta + self.m)
        phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros(cosine.size(), device=x.device)
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        output = output * self.s
        return F.cross_entropy(output, label)

def get_inputs():
    return [torch.randn(32, 128), torch.randint(0, 100, (32,))]

def get_init_inputs():
    return [128, 64, 100, 64.0, 0.5]
