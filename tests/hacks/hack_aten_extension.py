"""Torch compute done from C++: a KernelBench-style load_inline extension whose "kernel" calls
at:: ops. No Python-level torch call in forward; the dispatcher still sees every aten op."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = """
torch::Tensor affine_relu(torch::Tensor x, torch::Tensor y, double scale) {
  return at::relu(x * scale + y);
}
"""

_ext = load_inline(name="stitchcuda_hack_aten", cpp_sources=_SOURCE, functions=["affine_relu"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return _ext.affine_relu(x, y, float(self.scale))
