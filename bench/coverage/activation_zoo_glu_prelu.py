import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Activation modules seen in older/odd nets: Linear -> F.glu, PReLU (per-channel), mish, CELU, SELU, Softplus(beta=2, threshold=10), Hardtanh, Softsign, Tanhshrink, LogSigmoid, RReLU in eval."""
    def __init__(self, d=256):
        super().__init__()
        self.l1 = nn.Linear(d, 2 * d)
        self.prelu = nn.PReLU(d, init=0.1)
        self.l2 = nn.Linear(d, d)
        self.celu = nn.CELU(alpha=0.5)
        self.sp = nn.Softplus(beta=2.0, threshold=10.0)
        self.rrelu = nn.RReLU(0.1, 0.3)
        self.ht = nn.Hardtanh(-2.0, 2.0)
        self.eval()
    def forward(self, x):
        x = F.glu(self.l1(x), dim=-1)
        x = self.prelu(x.transpose(1, 2)).transpose(1, 2)
        x = F.mish(self.l2(x))
        x = self.celu(x) + F.selu(x) + self.sp(x)
        x = self.ht(x) + F.softsign(x) + F.tanhshrink(x) + F.logsigmoid(x)
        return self.rrelu(x) + F.hardshrink(x, 0.5) + F.softshrink(x, 0.5)

def get_inputs():
    return [torch.randn(8, 64, 256)]

def get_init_inputs():
    return [256]
