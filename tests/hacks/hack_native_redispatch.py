# Cheat (red team, 2026-12-02): nn.Linear's O(MNK) product done by PyTorch's own mm kernel, called from
# the candidate's native code through at::_ops::mm_out::redispatch, looked up by a mangled name built
# from pieces (kernels_redispatch.cpp) in the already-loaded libtorch_cpu. A redispatch enters the kernel of the
# key set it is handed (here the dense CPU backend alone): no Python dispatch key (no op recorder),
# and the dispatcher runs no RecordFunction on a redispatch (no profiler op event in the blind
# check's witness). The preloaded dlsym watch keeps only at::cpu/cuda/native/meta/composite* names,
# nm of the library shows no undefined ATen symbol, and the C++ source never spells the words the
# native-source check looks for. Only the bias and ReLU run in the candidate's loop.
# (A comment, not a docstring: string constants in the module are read by the native-source regex.)

from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels_redispatch.cpp"))
_dense = getattr(torch._C, "_dispatch_keys")(torch.empty(1))  # noqa: B009 - as the red team wrote it
_KEYS = type(_dense)(torch._C.DispatchKey.CPU).raw_repr()  # the dense CPU backend's key set alone


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        w, b = self.linear.weight.detach(), self.linear.bias.contiguous()
        wt = w.t()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _lib.call("linear_relu_mixed", x, w, b, out, x._cdata, wt._cdata, out._cdata, _KEYS,
                  x.shape[0], x.shape[1], w.shape[0])
        return out
