import torch
import torch.nn as nn
from torch.nn.utils import weight_norm

class ScaleDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Sequential(nn.ReflectionPad1d(7), weight_norm(nn.Conv1d(1, 16, 15)), nn.LeakyReLU(0.2, True)),
            nn.Sequential(weight_norm(nn.Conv1d(16, 64, 41, stride=4, padding=20, groups=4)), nn.LeakyReLU(0.2, True)),
            nn.Sequential(weight_norm(nn.Conv1d(64, 128, 41, stride=4, padding=20, groups=16)), nn.LeakyReLU(0.2, True)),
            nn.Sequential(weight_norm(nn.Conv1d(128, 128, 5, stride=1, padding=2)), nn.LeakyReLU(0.2, True)),
            weight_norm(nn.Conv1d(128, 1, 3, stride=1, padding=1)),
        ])
    def forward(self, x):
        feats = []
        for layer in self.layers:
            x = layer(x)
            feats.append(x)
        return feats

class Model(nn.Module):
    """MelGAN multi-scale discriminator: three ScaleDiscriminators (old torch.nn.utils.weight_norm, grouped strided Conv1d, ReflectionPad1d) on the waveform pooled by AvgPool1d(4, 2, padding=2, count_include_pad=False); returns each scale's score and the feature-matching L1 between real and fake features."""
    def __init__(self):
        super().__init__()
        self.discs = nn.ModuleList([ScaleDiscriminator() for _ in range(3)])
        self.pool = nn.AvgPool1d(4, 2, padding=2, count_include_pad=False)

    def forward(self, real, fake):
        scores, fm = [], 0.0
        for i, d in enumerate(self.discs):
            if i > 0:
                real, fake = self.pool(real), self.pool(fake)
            fr, ff = d(real), d(fake)
            scores.append(ff[-1].mean())
            for a, b in zip(fr[:-1], ff[:-1]):
                fm = fm + torch.mean(torch.abs(a.detach() - b))
        adv = sum(torch.mean((1 - s) ** 2) for s in scores)
        return adv, fm

def get_inputs():
    return [torch.randn(2, 1, 2048), torch.randn(2, 1, 2048)]

def get_init_inputs():
    return []
