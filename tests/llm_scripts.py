"""Scripted LLM conversations for three KernelBench level-1 problems, with real CUDA (device
kernels): what tests/openai_server.py answers when scripts/llm_scripted_gpu.py drives the full
loop on the GPU. Each conversation's first candidate is flawed the way models' first tries are
(wrong on inputs the random sets miss, a build error, a PyTorch fallback); the second fixes it.
The planner's turn is built from the traced graph by `plan_answer`."""

from __future__ import annotations

import json

FENCE = "```"


def answer(model: str, cu: str, lead: str) -> str:
    return f"{lead}\n\n{FENCE}python model_new.py\n{model}{FENCE}\n\n{FENCE}cuda kernels.cu\n{cu}{FENCE}\n"


def plan_answer(compute_nodes: list[str], why: str) -> str:
    return json.dumps({"groups": [{"kind": "fused", "nodes": compute_nodes, "library": None,
                                   "layout": "contiguous", "why": why}],
                       "host": {"cuda_graph": False, "streams": 1}, "notes": []})


UNARY_MODEL = '''from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.call("NAME", x, y, x.numel())
        return y
'''

RELU_LEAKY = '''#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] >= 0.f ? x[i] : 0.01f * x[i];
}

extern "C" int relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_kernel<<<4096, 256, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
'''

RELU_VEC4 = '''#include <cuda_runtime.h>
#include <cstdint>

// NaN stays NaN (as torch.relu): compare for "less than zero", not "greater than".
__device__ __forceinline__ float relu1(float v) { return v < 0.f ? 0.f : v; }

__global__ void relu_vec4_kernel(const float4* x, float4* y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    y[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
  }
}

__global__ void relu_tail_kernel(const float* x, float* y, int64_t start, int64_t n) {
  int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = relu1(x[i]);
}

extern "C" int relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int64_t n4 = n / 4;  // torch allocations are 256-byte aligned: float4 access is safe
  if (n4) relu_vec4_kernel<<<132 * 8, 256, 0, stream>>>((const float4*)x, (float4*)y, n4);
  if (n % 4) relu_tail_kernel<<<1, 256, 0, stream>>>(x, y, n4 * 4, n);
  return (int)cudaGetLastError();
}
'''

SIGMOID = '''#include <cuda_runtime.h>
#include <cstdint>

__global__ void sigmoid_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = 1.f / (1.f + expf(-x[i]));
}

extern "C" int sigmoid(const float* x, float* y, int64_t n, cudaStream_t stream) {
  sigmoid_kernel<<<132 * 8, 256, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
'''
SIGMOID_BROKEN = SIGMOID.replace("y[i] = 1.f / (1.f + expf(-x[i]));", "y[i] = 1.f / (1.f + expf(-x[i]))")

SUM_MODEL = '''from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cu"))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        d = self.dim % x.dim()
        outer = 1
        for s in x.shape[:d]:
            outer *= s
        inner = 1
        for s in x.shape[d + 1 :]:
            inner *= s
        shape = list(x.shape)
        shape[d] = 1
        y = torch.empty(shape, device=x.device, dtype=x.dtype)
        _lib.call("sum_dim", x, y, outer, x.shape[d], inner)
        return y
'''
SUM_HACK = SUM_MODEL.replace(
    '''        y = torch.empty(shape, device=x.device, dtype=x.dtype)
        _lib.call("sum_dim", x, y, outer, x.shape[d], inner)
        return y''', '''        return torch.sum(x, dim=d, keepdim=True)''')
SUM_CU = '''#include <cuda_runtime.h>
#include <cstdint>

// y[o, i] = sum_j x[o, j, i]: one thread per output; neighbouring threads read neighbouring i, so
// every load of the loop is coalesced. Accumulated in double: 4096 terms in float drift by ~1e-4.
__global__ void sum_dim_kernel(const float* x, float* y, int64_t outer, int64_t r, int64_t inner) {
  const int64_t out = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (out >= outer * inner) return;
  const float* p = x + (out / inner) * r * inner + out % inner;
  double acc = 0.0;
  for (int64_t j = 0; j < r; ++j) acc += p[j * inner];
  y[out] = (float)acc;
}

extern "C" int sum_dim(const float* x, float* y, int64_t outer, int64_t r, int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * inner;
  sum_dim_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, outer, r, inner);
  return (int)cudaGetLastError();
}
'''

# problem (relative to the KernelBench folder) -> the two coder answers, in order.
CONVERSATIONS: dict[str, list[str]] = {
    "level1/19_ReLU.py": [
        answer(UNARY_MODEL.replace("NAME", "relu"), RELU_LEAKY, "A grid-stride ReLU kernel."),
        answer(UNARY_MODEL.replace("NAME", "relu"), RELU_VEC4, "Fixed: exact ReLU, with 16-byte loads."),
    ],
    "level1/21_Sigmoid.py": [
        answer(UNARY_MODEL.replace("NAME", "sigmoid"), SIGMOID_BROKEN, "A sigmoid kernel."),
        answer(UNARY_MODEL.replace("NAME", "sigmoid"), SIGMOID, "Fixed the missing semicolon."),
    ],
    "level1/47_Sum_reduction_over_a_dimension.py": [
        answer(SUM_HACK, SUM_CU, "Using torch.sum for now, the kernel is below."),
        answer(SUM_MODEL, SUM_CU, "The reduction now runs in the kernel."),
    ],
}
# What each first answer is meant to get from the Verifier.
FIRST_VERDICT = {"level1/19_ReLU.py": "incorrect", "level1/21_Sigmoid.py": "build-failed",
                 "level1/47_Sum_reduction_over_a_dimension.py": "hacked"}
