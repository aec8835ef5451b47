// CUDA kernels for the GPU tests, called through stitchcuda.runtime: tensors arrive as device
// pointers, ints as int64, floats as double, and the caller's stream last. Built with -lcublas.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdint>

__global__ void affine_relu_kernel(const float* x, const float* y, float* out, float s, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float v = x[i] * s + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
}

__global__ void relu_inplace_kernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    x[i] = x[i] > 0.f ? x[i] : 0.f;
}

static unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

extern "C" int affine_relu(const float* x, const float* y, float* out, int64_t n, double scale,
                           cudaStream_t stream) {
  affine_relu_kernel<<<blocks_for(n), 256, 0, stream>>>(x, y, out, (float)scale, n);
  return (int)cudaGetLastError();
}

// Row-major C[m, n] = relu(A[m, k] B[k, n]) with cuBLAS: column-major C^T = B^T A^T, so the
// operands are passed swapped and nothing is transposed.
extern "C" int matmul_relu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                           cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1000;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return 1001;
  const float alpha = 1.f, beta = 0.f;
  cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                                  (int)n, a, (int)k, &beta, c, (int)n);
  if (st != CUBLAS_STATUS_SUCCESS) return 1100 + (int)st;
  relu_inplace_kernel<<<blocks_for(m * n), 256, 0, stream>>>(c, m * n);
  return (int)cudaGetLastError();
}

// Each value rounded to bf16's 8 bits of mantissa (to nearest, in place): a cheaper product's error,
// about 2e-3 relative, within a TF32 tolerance of 1e-2.
__global__ void round_bf16_kernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    unsigned bits = __float_as_uint(x[i]);
    bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    x[i] = __uint_as_float(bits);
  }
}

extern "C" int round_bf16(float* x, int64_t n, cudaStream_t stream) {
  round_bf16_kernel<<<blocks_for(n), 256, 0, stream>>>(x, n);
  return (int)cudaGetLastError();
}

// A candidate bug: writes a terabyte past the end of its output.
__global__ void wild_write_kernel(float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i + (int64_t(1) << 40)] = 1.f;
}

extern "C" int wild_write(float* out, int64_t n, cudaStream_t stream) {
  wild_write_kernel<<<blocks_for(n), 256, 0, stream>>>(out, n);
  return (int)cudaGetLastError();
}
