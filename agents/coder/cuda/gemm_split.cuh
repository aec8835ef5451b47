//! 3xTF32 matmuls (emit_gemm.py): fp32 -> (hi, lo), hi rounded to TF32's 10-bit mantissa (to
//! nearest, ties away from zero, as cvt.rna.tf32.f32 does), lo = x - hi exactly. Non-finite values
//! stay in hi; a value that would round up past the largest float is truncated instead.
#ifndef SC_GEMM_SPLIT_H
#define SC_GEMM_SPLIT_H
__global__ void __launch_bounds__(256) sc_tf32_split_kernel(const float* __restrict__ x, float* __restrict__ hi,
                                                            float* __restrict__ lo, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    const unsigned u = __float_as_uint(v);
    float h = __uint_as_float((u + 0x1000u) & 0xFFFFE000u);
    if (!isfinite(h)) h = isfinite(v) ? __uint_as_float(u & 0xFFFFE000u) : v;
    hi[i] = h;
    lo[i] = isfinite(v) ? v - h : 0.0f;
  }
}

static int sc_tf32_split(const float* x, float* hi, float* lo, int64_t n, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  sc_tf32_split_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(x, hi, lo, n);
  return (int)cudaGetLastError();
}
#endif  // SC_GEMM_SPLIT_H