"""WaveNet stack with global conditioning (speaker embedding): causal dilated convs (dilations 1,2,4,8, left pad), gated tanh*sigmoid with the conditioning projected by a 1x1 conv added to both halves, residual and skip 1x1 convs, skip sum, ReLU -> 1x1 -> ReLU -> 1x1 head."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c=64, skip=64, cond=32, n_spk=10, dilations=(1, 2, 4, 8)):
        super().__init__()
        self.dil = dilations
        self.spk = nn.Embedding(n_spk, cond)
        self.front = nn.Conv1d(1, c, 1)
        self.filt = nn.ModuleList([nn.Conv1d(c, 2 * c, 2, dilation=d) for d in dilations])
        self.cond = nn.ModuleList([nn.Conv1d(cond, 2 * c, 1) for _ in dilations])
        self.res = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in dilations])
        self.skp = nn.ModuleList([nn.Conv1d(c, skip, 1) for _ in dilations])
        self.head1 = nn.Conv1d(skip, skip, 1)
        self.head2 = nn.Conv1d(skip, 256, 1)

    def forward(self, audio, speaker):
        x = self.front(audio)
        g = self.spk(speaker).unsqueeze(-1)  # B, cond, 1
        total = 0
        for d, f, cnd, r, s in zip(self.dil, self.filt, self.cond, self.res, self.skp):
            z = f(F.pad(x, (d, 0))) + cnd(g)
            a, b = z.chunk(2, dim=1)
            z = torch.tanh(a) * torch.sigmoid(b)
            x = x + r(z)
            total = total + s(z)
        return self.head2(F.relu(self.head1(F.relu(total))))


def get_inputs():
    return [torch.randn(4, 1, 256), torch.randint(0, 10, (4,))]


def get_init_inputs():
    return []
