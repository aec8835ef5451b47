//! Matmuls whose operands or result cuBLAS would read unaligned (emit_gemm.padded_plan): each
//! operand copied dense with its dims rounded up to 16 bytes (zeros past the ends), the product run
//! over the copies into a padded result, and that result copied into place. Why: with a leading
//! dimension or contiguous extent off 16 bytes cuBLAS takes its align1 kernels, at a fraction of the
//! tensor cores' rate (level 1's 8, 8205 x 2949 x 5921 in TF32 on the H200: 2.41 ms, where
//! torch.compile pads as here and took 1.10).
#ifndef SC_GEMM_PAD_H
#define SC_GEMM_PAD_H
// op(X), rows x cols as cuBLAS reads it (column-major through ld, transposed when `trans`, the next
// batch bs elements on), written dense and column-major as rows_p x cols_p, zeros past rows and cols;
// each batch rows_p * cols_p elements after the last. One 32 x 32 tile a block at a time, read along
// X's contiguous dim into shared memory (gemm.cuh's sc_gemm_tile_load) and written along dst's.
template <typename T>
__global__ void __launch_bounds__(256) sc_gemm_pad_kernel(const T* __restrict__ x, T* __restrict__ dst,
                                                          int64_t batches, int64_t rows, int64_t cols, int64_t ld,
                                                          int trans, int64_t bs, int64_t rows_p, int64_t cols_p) {
  __shared__ T tile[32][33];  // [column][row] of the tile; padded against bank conflicts
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t rt = (rows_p + 31) / 32, ct = (cols_p + 31) / 32, per = rows_p * cols_p;
  for (int64_t t = blockIdx.x; t < batches * rt * ct; t += gridDim.x) {
    const int64_t b = t / (rt * ct), rc = t - b * rt * ct;
    const int64_t r0 = (rc % rt) * 32, c0 = (rc / rt) * 32;
    sc_gemm_tile_load<T>(tile, x + b * bs, r0, c0, rows, cols, ld, trans);
    __syncthreads();
    T* db = dst + b * per;
    for (int k = ty; k < 32; k += 8) {
      const int64_t r = r0 + tx, c = c0 + k;
      if (r < rows_p && c < cols_p) db[c * rows_p + r] = tile[k][tx];
    }
    __syncthreads();  // the tile is read before the next one is loaded
  }
}

template <typename T>
static int sc_gemm_pad(const T* x, T* dst, int64_t batches, int64_t rows, int64_t cols, int64_t ld, int trans,
                       int64_t bs, int64_t rows_p, int64_t cols_p, cudaStream_t stream) {
  const int64_t tiles = batches * ((rows_p + 31) / 32) * ((cols_p + 31) / 32);
  sc_gemm_pad_kernel<T><<<(unsigned)(tiles < 65536 ? tiles : 65536), 256, 0, stream>>>(x, dst, batches, rows, cols,
                                                                                       ld, trans, bs, rows_p, cols_p);
  return (int)cudaGetLastError();
}

// The padded result (m_p x n column-major a batch, m_p * n elements apart) into c (m x n, ldc, the
// next batch stride_c on): one column run of m a block at a time, both sides read and written along m.
template <typename T>
__global__ void __launch_bounds__(256) sc_gemm_unpad_kernel(const T* __restrict__ cp, T* __restrict__ c,
                                                            int64_t runs, int64_t m, int64_t n, int64_t m_p,
                                                            int64_t ldc, int64_t stride_c) {
  for (int64_t run = blockIdx.x; run < runs; run += gridDim.x) {
    const int64_t b = run / n, j = run - b * n;
    const T* src = cp + run * m_p;
    T* out = c + b * stride_c + j * ldc;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) out[i] = src[i];
  }
}

// A dense, 16-byte aligned c (every result a planned product makes here, unless it writes into a
// slice) takes gemm_unpad.cuh's flat copy.
template <typename T>
static int sc_gemm_unpad(const T* cp, T* c, int64_t batches, int64_t m, int64_t n, int64_t m_p, int64_t ldc,
                         int64_t stride_c, cudaStream_t stream) {
  if (ldc == m && (batches == 1 || stride_c == m * n) && reinterpret_cast<uintptr_t>(c) % 16 == 0)
    return sc_gemm_unpad_dense<T>(cp, c, batches * m * n, m, m_p, stream);
  const int64_t runs = batches * n;
  sc_gemm_unpad_kernel<T><<<(unsigned)(runs < 65536 ? runs : 65536), 256, 0, stream>>>(cp, c, runs, m, n, m_p, ldc,
                                                                                      stride_c);
  return (int)cudaGetLastError();
}
#endif  // SC_GEMM_PAD_H
