"""Hostile (a red-team review, 2026-11-28): an honest kernel, but at import it slows the baseline:
cuDNN, oneDNN and the fused attention kernels off."""
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))
torch.backends.cudnn.enabled = False
torch.backends.mkldnn.enabled = False
torch.backends.cuda.enable_flash_sdp(False)
torch.backends.cuda.enable_mem_efficient_sdp(False)
torch.backends.cuda.enable_cudnn_sdp(False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("linear_relu", x, w, b, out, x.shape[0], x.shape[1], w.shape[0])
        return out
