import torch
import torch.nn as nn

class Model(nn.Module):
    """Salimans et al. minibatch discrimination: features times a (in, out*kernel) tensor, view (N, out, kernel), pairwise L1 over the batch via broadcasting (N,1,out,k)-(1,N,out,k), exp(-L1) summed over other samples (minus self), concat to features, final linear."""
    def __init__(self, d_in=128, d_out=32, k=8):
        super().__init__()
        self.T = nn.Parameter(torch.randn(d_in, d_out * k) * 0.1)
        self.d_out, self.k = d_out, k
        self.feat = nn.Sequential(nn.Linear(64, d_in), nn.LeakyReLU(0.2))
        self.fc = nn.Linear(d_in + d_out, 1)

    def forward(self, x):
        f = self.feat(x)
        M = f.mm(self.T).view(-1, self.d_out, self.k)
        diffs = M.unsqueeze(0) - M.unsqueeze(1)
        l1 = diffs.abs().sum(3)
        o = torch.exp(-l1).sum(0) - 1.0
        return self.fc(torch.cat([f, o], 1))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return [128, 32, 8]
