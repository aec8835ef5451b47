"""Escape: starts a process when imported, by the route ESCAPE_ROUTE names; the process would
create ESCAPE_TARGET (outside the run folder)."""

import ctypes
import os
import subprocess
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


_cmd = f"touch {os.environ['ESCAPE_TARGET']}"
_route = os.environ["ESCAPE_ROUTE"]
if _route == "subprocess":
    subprocess.run(["sh", "-c", _cmd], check=False)
elif _route == "os.system":
    os.system(_cmd)
elif _route == "fork":
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", _cmd])
elif _route == "posix_spawn":
    os.posix_spawn("/bin/sh", ["sh", "-c", _cmd], dict(os.environ))
elif _route == "ctypes":
    ctypes.CDLL("libc.so.6").system(_cmd.encode())


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
