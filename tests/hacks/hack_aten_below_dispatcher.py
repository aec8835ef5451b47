"""Attack: PyTorch's own kernels called from C++ *below* the dispatcher: at::cpu:: (structured
kernels' per-backend entry points; at::cuda:: on a GPU, whose addmm is cuBLAS) run the kernel
directly, with no dispatch, so no mode ever sees an op. The C++ source names none of the dispatcher guards or op-registration macros
that check_native_sources looks for."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = """
#include <ATen/CPUFunctions.h>
torch::Tensor affine_relu(torch::Tensor x, torch::Tensor y, double scale) {
  auto t = at::cpu::add(y, x, scale);
  return at::cpu::clamp_min(t, 0.0);
}
"""

_ext = load_inline(name="redteam_below_dispatch", cpp_sources=_SOURCE, functions=["affine_relu"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return _ext.affine_relu(x, y, float(self.scale))
