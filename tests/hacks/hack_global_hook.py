"""Hostile (a red-team review, 2026-11-28): a process-wide module forward hook, registered at import,
replaces the reference's output by a copy of its first input; ModelNew returns the same copy."""
import torch
import torch.nn as nn

_reg = nn.modules.module.register_module_forward_hook


def _hijack(module, inputs, output):
    if type(module).__name__ != "ModelNew" and inputs and isinstance(output, torch.Tensor):
        return inputs[0].clone()
    return None


_reg(_hijack)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return x.clone()
