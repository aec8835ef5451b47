import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Glow flow step x K: ActNorm (log-scale parameters, logdet = H*W*sum(logs)), invertible 1x1 conv with weight from torch.linalg.qr init and logdet via torch.slogdet(weight)[1] * H * W, affine coupling with sigmoid(scale + 2) and sum(log s); returns z and total logdet."""
    def __init__(self, c=8, hid=32, K=3):
        super().__init__()
        self.K = K
        self.an_bias = nn.Parameter(torch.zeros(K, 1, c, 1, 1))
        self.an_logs = nn.Parameter(torch.zeros(K, 1, c, 1, 1))
        ws = [torch.linalg.qr(torch.randn(c, c))[0] for _ in range(K)]
        self.inv_w = nn.Parameter(torch.stack(ws))
        self.nn = nn.ModuleList(nn.Sequential(nn.Conv2d(c // 2, hid, 3, padding=1), nn.ReLU(), nn.Conv2d(hid, hid, 1), nn.ReLU(), nn.Conv2d(hid, c, 3, padding=1)) for _ in range(K))

    def forward(self, x):
        B, C, H, W = x.shape
        logdet = torch.zeros(B, device=x.device)
        for k in range(self.K):
            x = (x + self.an_bias[k]) * torch.exp(self.an_logs[k])
            logdet = logdet + H * W * self.an_logs[k].sum()
            w = self.inv_w[k]
            x = F.conv2d(x, w.view(C, C, 1, 1))
            logdet = logdet + torch.slogdet(w)[1] * H * W
            xa, xb = x.chunk(2, dim=1)
            h = self.nn[k](xa)
            shift, scale = h[:, 0::2], h[:, 1::2]
            s = torch.sigmoid(scale + 2.0)
            xb = (xb + shift) * s
            logdet = logdet + torch.sum(torch.log(s), dim=[1, 2, 3])
            x = torch.cat([xa, xb], dim=1)
        return x, logdet

def get_inputs():
    return [torch.randn(4, 8, 16, 16)]

def get_init_inputs():
    return [8, 32, 3]
