import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """QuartzNet/Jasper sub-block (eval): time-channel separable conv1d with a length mask, BN, ReLU, residual 1x1 branch."""
    def __init__(self, c_in=128, c_out=256, k=33):
        super().__init__()
        self.dw = nn.Conv1d(c_in, c_in, k, padding=k // 2, groups=c_in, bias=False)
        self.pw = nn.Conv1d(c_in, c_out, 1, bias=False)
        self.bn = nn.BatchNorm1d(c_out)
        self.res = nn.Sequential(nn.Conv1d(c_in, c_out, 1, bias=False), nn.BatchNorm1d(c_out))
        self.eval()
    def forward(self, x, lengths):
        T = x.shape[-1]
        mask = torch.arange(T, device=x.device)[None, :] < lengths[:, None]
        m = mask.unsqueeze(1).to(x.dtype)
        y = self.bn(self.pw(self.dw(x * m)))
        y = y + self.res(x)
        return F.relu(y) * m

def get_inputs():
    return [torch.randn(4, 128, 400), torch.tensor([400, 350, 280, 123], dtype=torch.int64)]

def get_init_inputs():
    return [128, 256, 33]
