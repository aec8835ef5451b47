//! Shared by every matmul kernel of a .cu (emit_gemm.py): one cuBLAS handle per device.
//! Placeholders: @WORKSPACE_BYTES@ (the workspace each call is given), @CUBLAS_ERROR_BASE@ (added to
//! a failed cublasStatus_t, above every cudaError_t).
#ifndef SC_GEMM_H
#define SC_GEMM_H
#include <atomic>
#include <mutex>
#include <cublas_v2.h>

#define SC_GEMM_WORKSPACE ((size_t)@WORKSPACE_BYTES@)
#define SC_GEMM_ERROR(status) (@CUBLAS_ERROR_BASE@ + (int)(status))
#define SC_GEMM_MAX_DEVICES 64

// (maybe_unused: only bias epilogues through cuBLASLt call it; a .cu of bias-free products, or of
// products alone, would warn of it and of the prelude's sc_grid.)
[[maybe_unused]] static bool sc_gemm_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
[[maybe_unused]] static unsigned (*const sc_gemm_grid)(int64_t) = &sc_grid;

// op(X)'s 32 x 32 tile at (r0, c0) into shared memory as tile[column][row], zeros past rows and
// cols: op(X) rows x cols as cuBLAS reads it (column-major through ld, transposed when `trans`),
// read along X's contiguous dim (its rows when not `trans`, else its columns) by a block's 8 warps.
// The operand copies' first half (the split products' pack, gemm_split.cuh; the padded copies, gemm_pad.cuh).
template <typename T>
__device__ __forceinline__ void sc_gemm_tile_load(T (*tile)[33], const T* __restrict__ xb, int64_t r0, int64_t c0,
                                                  int64_t rows, int64_t cols, int64_t ld, int trans) {
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for (int k = ty; k < 32; k += 8) {
    if (trans) {  // X(r, c) = x[r * ld + c]: lanes along c
      const int64_t r = r0 + k, c = c0 + tx;
      tile[tx][k] = r < rows && c < cols ? xb[r * ld + c] : T(0.0f);
    } else {  // X(r, c) = x[c * ld + r]: lanes along r
      const int64_t r = r0 + tx, c = c0 + k;
      tile[k][tx] = r < rows && c < cols ? xb[c * ld + r] : T(0.0f);
    }
  }
}

// One cuBLAS handle per device for the whole process, created on first use; every call sets the
// caller's stream and workspace (cublasSetStream resets the workspace, so the order matters), so
// nothing is allocated behind the caching allocator's back and calls can be graph-captured.
static int sc_gemm_handle(cudaStream_t stream, void* workspace, cublasHandle_t* out) {
  static std::atomic<cublasHandle_t> handles[SC_GEMM_MAX_DEVICES];
  static std::mutex lock;
  int dev = 0;
  const cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return (int)e;
  if (dev < 0 || dev >= SC_GEMM_MAX_DEVICES) return (int)cudaErrorInvalidDevice;
  cublasHandle_t h = handles[dev].load();
  if (h == nullptr) {
    std::lock_guard<std::mutex> guard(lock);
    h = handles[dev].load();
    if (h == nullptr) {
      const cublasStatus_t s = cublasCreate(&h);
      if (s != CUBLAS_STATUS_SUCCESS) return SC_GEMM_ERROR(s);
      handles[dev].store(h);
    }
  }
  cublasStatus_t s = cublasSetStream(h, stream);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetWorkspace(h, workspace, SC_GEMM_WORKSPACE);
  if (s != CUBLAS_STATUS_SUCCESS) return SC_GEMM_ERROR(s);
  *out = h;
  return 0;
}
#endif  // SC_GEMM_H