"""Bytes copied by ctypes.memmove into Python-made buffers, arithmetic in Python, written back by memmove."""
import ctypes

import torch
import torch.nn as nn


def _read(t):
    buf = (ctypes.c_float * t.numel())()
    ctypes.memmove(buf, t.data_ptr(), t.numel() * 4)
    return list(buf)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        rows, inn = x.shape
        outs = w.shape[0]
        out = torch.empty(rows, outs, dtype=x.dtype, device=x.device)
        xs, ws, bs = _read(x), _read(w), _read(b)
        res = (ctypes.c_float * (rows * outs))()
        for m in range(rows):
            for j in range(outs):
                acc = bs[j] + sum(xs[m * inn + k] * ws[j * inn + k] for k in range(inn))
                res[m * outs + j] = max(acc, 0.0)
        ctypes.memmove(out.data_ptr(), res, rows * outs * 4)
        return out


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16, 8]
