import torch
import torch.nn as nn

class Model(nn.Module):
    """Probabilistic forecasting head: robust input scaling with torch.median and torch.quantile (IQR) over time, multi-quantile output, pinball loss max((q-1)e, q e), quantile crossing penalty via sorted differences, kthvalue-based trimmed error."""
    def __init__(self, T=48, H=12, hid=64):
        super().__init__()
        self.H = H
        self.register_buffer("qs", torch.tensor([0.1, 0.5, 0.9]))
        self.net = nn.Sequential(nn.Linear(T, hid), nn.ReLU(), nn.Linear(hid, H * 3))

    def forward(self, x, y):
        med = x.median(dim=1, keepdim=True).values
        q = torch.quantile(x, torch.tensor([0.25, 0.75], device=x.device), dim=1, keepdim=True)
        iqr = (q[1] - q[0]).clamp(min=1e-3)
        xs = (x - med) / iqr
        pred = self.net(xs).view(-1, self.H, 3) * iqr.unsqueeze(-1) + med.unsqueeze(-1)
        e = y.unsqueeze(-1) - pred
        pinball = torch.max((self.qs - 1) * e, self.qs * e).mean()
        crossing = torch.relu(pred[..., :-1] - pred[..., 1:]).mean()
        abs_err = (y - pred[..., 1]).abs()
        k = int(0.9 * abs_err.size(1))
        trimmed = torch.kthvalue(abs_err, k, dim=1).values.mean()
        return pinball + crossing, trimmed

def get_inputs():
    return [torch.randn(16, 48), torch.randn(16, 12)]

def get_init_inputs():
    return [48, 12, 64]
