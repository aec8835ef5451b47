import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """ASR feature post-processing: delta and delta-delta via F.pad(mode='replicate') and a fixed regression Conv1d kernel (grouped), utterance CMVN, and SpecAugment time/frequency masks built from arange comparisons with per-utterance starts passed in, applied with masked_fill."""
    def __init__(self, n_mels=40, win=2):
        super().__init__()
        self.n_mels, self.win = n_mels, win
        n = torch.arange(-win, win + 1, dtype=torch.float32)
        k = n / (2 * (n ** 2).sum())
        self.register_buffer("kernel", k.view(1, 1, -1).repeat(n_mels, 1, 1))

    def delta(self, x):
        x = F.pad(x, (self.win, self.win), mode="replicate")
        return F.conv1d(x, self.kernel, groups=self.n_mels)

    def forward(self, feats, f0, fw, t0, tw):
        # feats: B, n_mels, T
        d1 = self.delta(feats)
        d2 = self.delta(d1)
        x = torch.cat([feats, d1, d2], dim=1)
        x = (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True) + 1e-5)
        B, C, T = x.shape
        fr = torch.arange(C, device=x.device).view(1, C, 1)
        tr = torch.arange(T, device=x.device).view(1, 1, T)
        fmask = (fr >= f0.view(B, 1, 1)) & (fr < (f0 + fw).view(B, 1, 1))
        tmask = (tr >= t0.view(B, 1, 1)) & (tr < (t0 + tw).view(B, 1, 1))
        return x.masked_fill(fmask | tmask, 0.0)

def get_inputs():
    B = 4
    return [torch.randn(B, 40, 200), torch.randint(0, 100, (B,)), torch.randint(0, 15, (B,)),
            torch.randint(0, 150, (B,)), torch.randint(0, 40, (B,))]

def get_init_inputs():
    return [40, 2]
