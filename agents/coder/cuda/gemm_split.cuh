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
// One 32 x 32 tile of op(X) a block at a time: read along X's contiguous dim (its rows when not
// `trans`, else its columns) into shared memory, split once, and written as three column runs (dst's
// contiguous dim is always the row). Why a tile: a thread per destination element read X through
// `trans` strides, each element three times, behind three 64-bit divisions; on the H200 that packing
// took longer than the matmul it fed (a Swin window attention's qkv: 93 us against 90 us).
__global__ void __launch_bounds__(256) sc_tf32_pack_kernel(const float* __restrict__ x, float* __restrict__ dst,
                                                           int64_t batches, int64_t rows, int64_t cols, int64_t ld,
                                                           int trans, int64_t bs, int k_cols, int lo_part) {
  __shared__ float tile[32][33];  // [column][row] of the tile; padded against bank conflicts
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t rt = (rows + 31) / 32, ct = (cols + 31) / 32, per = 3 * rows * cols;
  for (int64_t t = blockIdx.x; t < batches * rt * ct; t += gridDim.x) {
    const int64_t b = t / (rt * ct), rc = t - b * rt * ct;
    const int64_t r0 = (rc % rt) * 32, c0 = (rc / rt) * 32;
    sc_gemm_tile_load<float>(tile, x + b * bs, r0, c0, rows, cols, ld, trans);
    __syncthreads();
    float* db = dst + b * per;
    for (int k = ty; k < 32; k += 8) {
      const int64_t r = r0 + tx, c = c0 + k;
      if (r < rows && c < cols) {
        float h, l;
        sc_tf32_hi_lo(tile[k][tx], h, l);
#pragma unroll
        for (int part = 0; part < 3; ++part)
          db[k_cols ? (part * cols + c) * rows + r : c * 3 * rows + part * rows + r] = part == lo_part ? l : h;
      }
    }
    __syncthreads();  // the tile is read before the next one is loaded
  }
}

static int sc_tf32_pack(const float* x, float* dst, int64_t batches, int64_t rows, int64_t cols, int64_t ld,
                        int trans, int64_t bs, int k_cols, int lo_part, cudaStream_t stream) {
  const int64_t tiles = batches * ((rows + 31) / 32) * ((cols + 31) / 32);
  sc_tf32_pack_kernel<<<(unsigned)(tiles < 65536 ? tiles : 65536), 256, 0, stream>>>(x, dst, batches, rows, cols, ld,
                                                                                    trans, bs, k_cols, lo_part);
  return (int)cudaGetLastError();
}
#endif  // SC_GEMM_SPLIT_H
