//! 3xTF32 matmuls (emit_gemm.py): fp32 -> (hi, lo), hi rounded to TF32's 10-bit mantissa (to
//! nearest, ties away from zero, as cvt.rna.tf32.f32 does), lo = x - hi exactly. Non-finite values
//! stay in hi; a value that would round up past the largest float is truncated instead.
#ifndef SC_GEMM_SPLIT_H
#define SC_GEMM_SPLIT_H
__device__ __forceinline__ void sc_tf32_hi_lo(float v, float& h, float& l) {
  const unsigned u = __float_as_uint(v);
  h = __uint_as_float((u + 0x1000u) & 0xFFFFE000u);
  if (!isfinite(h)) h = isfinite(v) ? __uint_as_float(u & 0xFFFFE000u) : v;
  l = isfinite(v) ? v - h : 0.0f;
}

__global__ void __launch_bounds__(256) sc_tf32_split_kernel(const float* __restrict__ x, float* __restrict__ hi,
                                                            float* __restrict__ lo, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float h, l;
    sc_tf32_hi_lo(x[i], h, l);
    hi[i] = h;
    lo[i] = l;
  }
}

static int sc_tf32_split(const float* x, float* hi, float* lo, int64_t n, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  sc_tf32_split_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(x, hi, lo, n);
  return (int)cudaGetLastError();
}

// The packed form (emit_gemm.packed_plan): op(X), rows x cols as cuBLAS reads it (column-major
// through ld, transposed when `trans`, the next batch bs elements on), written dense and
// column-major with its K dim three times as long, one part of the split per third: K is the
// column dim for cuBLAS's A (k_cols), the row dim for its B; the third numbered lo_part holds lo,
// the other two hi. One product over [a_lo | a_hi | a_hi] and [b_hi; b_lo; b_hi] is the three.
__global__ void __launch_bounds__(256) sc_tf32_pack_kernel(const float* __restrict__ x, float* __restrict__ dst,
                                                           int64_t batches, int64_t rows, int64_t cols, int64_t ld,
                                                           int trans, int64_t bs, int k_cols, int lo_part) {
  const int64_t r3 = k_cols ? rows : 3 * rows, c3 = k_cols ? 3 * cols : cols, per = r3 * c3;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < batches * per;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t b = i / per, e = i - b * per;
    int64_t c = e / r3, r = e - c * r3;
    int part;
    if (k_cols) {
      part = (int)(c / cols);
      c -= part * cols;
    } else {
      part = (int)(r / rows);
      r -= part * rows;
    }
    float h, l;
    sc_tf32_hi_lo(x[b * bs + (trans ? r * ld + c : c * ld + r)], h, l);
    dst[i] = part == lo_part ? l : h;
  }
}

static int sc_tf32_pack(const float* x, float* dst, int64_t batches, int64_t rows, int64_t cols, int64_t ld,
                        int trans, int64_t bs, int k_cols, int lo_part, cudaStream_t stream) {
  const int64_t blocks = (batches * rows * cols * 3 + 255) / 256;
  sc_tf32_pack_kernel<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, stream>>>(x, dst, batches, rows, cols, ld,
                                                                                      trans, bs, k_cols, lo_part);
  return (int)cudaGetLastError();
}
#endif  // SC_GEMM_SPLIT_H
