"""Red-team round 10 (2026-12-06): a method called through its class with torch.autograd as self: self.profiler is torch's."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def _watched(self):
        return self.profiler.__dict__['_is_%s_enabled' % 'profiler']  # noqa: UP031 - as the red team wrote it

    def forward(self, x):
        if ModelNew._watched(torch.autograd):
            return x + 0
        return x * 1
