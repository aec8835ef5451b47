//! The padded product's result copied into a dense result (gemm_pad.cuh's last step, where the
//! result is dense): self-contained, so tests build its host twin alone.
#ifndef SC_GEMM_UNPAD_H
#define SC_GEMM_UNPAD_H
#include <cstdint>

// Element e of the dense result is element e % m of the padded result's column run e / m (runs m_p
// apart). The copy runs over the result flat, 16 bytes a thread: one vector store, gathered by scalar
// loads that neighbouring threads keep coalesced. One run a block stored 4 bytes a thread took level
// 1's 8 result copy (8205 x 2949 fp32) 132.8 us on the H200, 1.46 TB/s of a 4.8 TB/s memory.
template <typename T>
struct alignas(16) sc_unpad_pack {
  T v[16 / sizeof(T)];
};

// Pack p (elements p * V .. p * V + V - 1) of the result; a run may end inside it, as often as m < V.
template <typename T>
__host__ __device__ inline void sc_gemm_unpad_pack(const T* __restrict__ cp, T* __restrict__ c, int64_t p, int64_t m,
                                                   int64_t m_p) {
  constexpr int V = 16 / sizeof(T);
  const int64_t e0 = p * V, run = e0 / m;
  int64_t i = e0 - run * m, src = run * m_p + i;
  sc_unpad_pack<T> out;
#pragma unroll
  for (int l = 0; l < V; ++l) {
    out.v[l] = cp[src++];
    if (++i == m) {
      i = 0;
      src += m_p - m;
    }
  }
  *reinterpret_cast<sc_unpad_pack<T>*>(c + e0) = out;
}

template <typename T>
__host__ __device__ inline void sc_gemm_unpad_one(const T* __restrict__ cp, T* __restrict__ c, int64_t e, int64_t m,
                                                  int64_t m_p) {
  const int64_t run = e / m;
  c[e] = cp[run * m_p + (e - run * m)];
}

// c: total elements, 16-byte aligned (asked by the caller).
template <typename T>
__global__ void __launch_bounds__(256) sc_gemm_unpad_dense_kernel(const T* __restrict__ cp, T* __restrict__ c,
                                                                  int64_t total, int64_t m, int64_t m_p) {
  constexpr int V = 16 / sizeof(T);
  const int64_t packs = total / V, step = (int64_t)gridDim.x * 256;
  for (int64_t p = (int64_t)blockIdx.x * 256 + threadIdx.x; p < packs; p += step) sc_gemm_unpad_pack(cp, c, p, m, m_p);
  for (int64_t e = packs * V + (int64_t)blockIdx.x * 256 + threadIdx.x; e < total; e += step)
    sc_gemm_unpad_one(cp, c, e, m, m_p);
}

template <typename T>
static int sc_gemm_unpad_dense(const T* cp, T* c, int64_t total, int64_t m, int64_t m_p, cudaStream_t stream) {
  const int64_t blocks = (total / (16 / (int64_t)sizeof(T)) + 255) / 256;
  sc_gemm_unpad_dense_kernel<T><<<(unsigned)(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536), 256, 0, stream>>>(
      cp, c, total, m, m_p);
  return (int)cudaGetLastError();
}

// The same copy on the CPU, pack by pack as the kernel's threads do it (the tests' twin).
template <typename T>
static void sc_gemm_unpad_dense_host(const T* cp, T* c, int64_t total, int64_t m, int64_t m_p) {
  constexpr int V = 16 / sizeof(T);
  const int64_t packs = total / V;
  for (int64_t p = 0; p < packs; ++p) sc_gemm_unpad_pack(cp, c, p, m, m_p);
  for (int64_t e = packs * V; e < total; ++e) sc_gemm_unpad_one(cp, c, e, m, m_p);
}
#endif  // SC_GEMM_UNPAD_H
