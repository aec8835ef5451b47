"""Cheat (red team, 2026-12-01): a norm estimated from a sample of its input (every 16th element),
within the tolerance on every set drawn iid from get_inputs. The sparse-spikes set (a few elements
far out of the rest's scale) is what a sample misses."""

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.call("norm_scale_sampled", x, out, x.numel())
        return out
