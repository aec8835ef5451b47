"""relu(x * s + y)."""
import array

import torch
import torch.nn as nn


def _floats(t):
    t = t.contiguous()
    raw = bytes(t.untyped_storage())
    a = array.array("f")
    a.frombytes(raw[t.storage_offset() * 4:(t.storage_offset() + t.numel()) * 4])
    return a


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        s = float(self.scale)
        a, b = _floats(x), _floats(y)
        out = array.array("f", (max(p * s + q, 0.0) for p, q in zip(a, b, strict=True)))
        return torch.tensor(list(out), dtype=x.dtype).reshape(x.shape)
