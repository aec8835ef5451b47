"""Red-team round 10 (2026-12-06): a class of the module's own named cpp_extension whose load returns torch."""
import torch
import torch.nn as nn


class cpp_extension:
    load = staticmethod(lambda *a, **k: torch)


def _kernels():
    return cpp_extension.load('k', [])


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        _kernels().add(x, y, out=out)
        return out
