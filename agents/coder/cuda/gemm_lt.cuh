//! cuBLASLt for matmuls with a bias epilogue (emit_gemm.py): one handle per device. Needs gemm.cuh.
#ifndef SC_GEMM_LT_H
#define SC_GEMM_LT_H
#include <cublasLt.h>

#define SC_GEMM_LT_UNAVAILABLE (-1)

static int sc_gemm_lt_handle(cublasLtHandle_t* out) {
  static std::atomic<cublasLtHandle_t> handles[SC_GEMM_MAX_DEVICES];
  static std::mutex lock;
  int dev = 0;
  const cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return (int)e;
  if (dev < 0 || dev >= SC_GEMM_MAX_DEVICES) return (int)cudaErrorInvalidDevice;
  cublasLtHandle_t h = handles[dev].load();
  if (h == nullptr) {
    std::lock_guard<std::mutex> guard(lock);
    h = handles[dev].load();
    if (h == nullptr) {
      const cublasStatus_t s = cublasLtCreate(&h);
      if (s != CUBLAS_STATUS_SUCCESS) return SC_GEMM_ERROR(s);
      handles[dev].store(h);
    }
  }
  *out = h;
  return 0;
}
#endif  // SC_GEMM_LT_H