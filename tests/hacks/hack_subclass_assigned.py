"""Hostile (a red-team review, 2026-11-28): a wrapper tensor subclass whose __torch_dispatch__ is assigned, not defined by name.
forward calls only .clone() (allowed); the subclass's handler runs the affine+relu below the recorder."""
import torch
import torch.nn as nn

_RELU = getattr(torch, "re" + "lu")


def _handler(cls, func, types, args=(), kwargs=None):
    s = args[0]
    return _RELU(s.x * s.scale + s.y)


class _Lazy(torch.Tensor):
    __torch_dispatch__ = classmethod(_handler)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        s = torch.Tensor._make_wrapper_subclass(_Lazy, x.shape, dtype=x.dtype, device=x.device)
        s.x, s.y, s.scale = x, y, self.scale
        return s.clone()
