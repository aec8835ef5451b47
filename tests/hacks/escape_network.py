"""Escape: connects to a server on 127.0.0.1 (ESCAPE_PORT) when imported and sends it a line."""

import os
import socket
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


with socket.create_connection(("127.0.0.1", int(os.environ["ESCAPE_PORT"])), timeout=5) as _s:
    _s.sendall(b"escaped\n")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
