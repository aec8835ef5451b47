"""hack_rt8_star_ctypes_cast's Python read of tensor memory, with `import ctypes` and then a star
import of a loaded module without __all__ that holds ctypes (torch._ops): star names that were modules
rebound the alias `ctypes` to "torch._ops.ctypes", so ctypes.cast was no longer "ctypes.cast"."""
import ctypes

import torch
import torch.nn as nn
from torch._ops import *  # noqa: F403


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
        px, pw, pb, po = (ctypes.cast(t.data_ptr(), ctypes.POINTER(ctypes.c_float)) for t in (x, w, b, out))
        for m in range(rows):
            for j in range(outs):
                acc = pb[j]
                for k in range(inn):
                    acc += px[m * inn + k] * pw[j * inn + k]
                po[m * outs + j] = acc if acc > 0 else 0.0
        return out
