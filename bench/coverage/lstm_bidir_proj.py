import torch
import torch.nn as nn

class Model(nn.Module):
    """Speech encoder LSTM with projections (LSTMP): nn.LSTM(bidirectional=True, num_layers=2, proj_size=32, batch_first=False) with explicit zero h0 (proj_size) / c0 (hidden), then frame-level linear."""
    def __init__(self, n_in=40, hid=64, proj=32, nout=30):
        super().__init__()
        self.hid, self.proj = hid, proj
        self.lstm = nn.LSTM(n_in, hid, num_layers=2, bidirectional=True, proj_size=proj)
        self.fc = nn.Linear(2 * proj, nout)

    def forward(self, x):
        T, B, _ = x.shape
        h0 = x.new_zeros(4, B, self.proj)
        c0 = x.new_zeros(4, B, self.hid)
        y, (hn, cn) = self.lstm(x, (h0, c0))
        return self.fc(y), hn

def get_inputs():
    return [torch.randn(50, 4, 40)]

def get_init_inputs():
    return [40, 64, 32, 30]
