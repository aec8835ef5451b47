"""Red-team round 10 (2026-12-06): a star import's dispatch-mode probe whose name the module also binds (a parameter)."""
import torch.nn as nn
from torch.utils._python_dispatch import *  # noqa: F403


def _unused(is_in_torch_dispatch_mode=None):
    return None


class ModelNew(nn.Module):
    def forward(self, x):
        if is_in_torch_dispatch_mode():  # noqa: F405
            return x + 0
        return x * 1
