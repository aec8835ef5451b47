import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d, d), nn.PReLU(d), nn.Linear(d, d), nn.Hardswish(),
            nn.Linear(d, d), nn.Mish(), nn.Linear(d, d), nn.SELU(), nn.AlphaDropout(0.1),
            nn.Linear(d, d), nn.PReLU(), nn.Hardsigmoid(), nn.Softplus(beta=2.0), nn.ELU(0.5), nn.CELU(),
            nn.Softsign(), nn.Tanhshrink(), nn.LogSigmoid())
        self.eval()
    def forward(self, x):
        return self.net(x)

def get_inputs():
    return [torch.randn(64, 512)]

def get_init_inputs():
    return [512]
