"""Reference: ref_affine's math through torch.compile (Inductor on the CPU: it writes its caches and
runs the C++ compiler in a process of its own on the first call, made when the worker builds the
reference: the worker records the reference's ops under a dispatch mode, where Dynamo runs eager),
and a folder of its own made outside the run folder (REF_OUTSIDE) on every call, as torch made
/tmp/torchinductor_root on the GPU machine. None of it is the candidate's doing: the sandbox
regression test of the revert (f543bca)."""

import os

import torch
import torch.nn as nn


def _affine_relu(x, y, scale: float):
    return torch.relu(x * scale + y)


_compiled = torch.compile(_affine_relu, backend="inductor")


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        _compiled(*get_inputs(), scale)  # compiled here, outside any mode

    def forward(self, x, y):
        if os.environ.get("REF_OUTSIDE"):
            os.makedirs(os.environ["REF_OUTSIDE"], exist_ok=True)
        return _compiled(x, y, self.scale)


def get_inputs():
    return [torch.randn(8, 33), torch.randn(8, 33)]


def get_init_inputs():
    return [2.5]
