# Cheat: nn.Linear's product done by PyTorch's own CPU addmm kernel, reached from a load_inline
# extension through OperatorHandle::callBoxedForDispatchKey (full kernel of one backend key: no
# Python key, no RecordFunction). Only the ReLU runs in the candidate's loop.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
torch::Tensor lin_relu(torch::Tensor x, torch::Tensor wt, torch::Tensor b) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::addmm", "");
  std::vector<c10::IValue> st{b, x, wt, c10::Scalar(1), c10::Scalar(1)};
  op.callBoxedForDispatchKey(c10::DispatchKey::CPU, st);
  at::Tensor out = st[0].toTensor();
  float* p = out.data_ptr<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
  return out;
}
"""
_ext = load_inline(name="rt5_boxed_for_key", cpp_sources=_SRC, functions=["lin_relu"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        return _ext.lin_relu(x, self.linear.weight.t(), self.linear.bias)
