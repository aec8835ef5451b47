//! Shared by every row-sort kernel of a .cu (emit_topk.py): a row along one dim sorted whole, a block
//! a row, by a bitonic network in shared memory; then its first K entries written (sort: all of them;
//! topk past what a warp keeps in registers: the first k).
//!
//! The order is topk.cuh's total order (value, then the lower index first on ties; NaN the largest),
//! so equal values keep their original order both ways, as a stable sort's do, and the CPU entry's
//! std::sort with the same comparison writes the same values and indices.

#ifndef SC_ROW_SORT_H
#define SC_ROW_SORT_H

#include <algorithm>
#include <vector>

#ifdef __CUDACC__
// Sorts P (a power of two) entries of shared memory; entries with index -1 (the padding past the row's
// end) go last. Every thread of the block takes part.
template <bool LARGEST>
__device__ __forceinline__ void sc_row_sort_block(float* key, int* ix, int P) {
  for (int k = 2; k <= P; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < P; t += blockDim.x) {
        const int l = t ^ j;
        if (l <= t) continue;
        const bool pad_t = ix[t] < 0, pad_l = ix[l] < 0;
        // Whether entry l belongs before entry t in the sorted order.
        const bool l_first = pad_t != pad_l ? pad_t
                                            : (!pad_t && sc_topk_before<LARGEST>(key[l], ix[l], key[t], ix[t]));
        if (((t & k) == 0) == l_first) {
          const float kv = key[t];
          key[t] = key[l];
          key[l] = kv;
          const int iv = ix[t];
          ix[t] = ix[l];
          ix[l] = iv;
        }
      }
      __syncthreads();
    }
  }
}
#endif

// The CPU entry's row: all of it read, sorted by the same order, its first K written by `put`.
template <bool LARGEST, class T, class Put>
static void sc_row_sort_host(const T* x, long long base, long long stride, long long count, int K, Put put) {
  std::vector<std::pair<float, long long>> row(count);
  for (long long j = 0; j < count; ++j) row[j] = {sc_to_f(x[base + j * stride]), j};
  std::sort(row.begin(), row.end(), [](const std::pair<float, long long>& a, const std::pair<float, long long>& b) {
    return sc_topk_before<LARGEST>(a.first, a.second, b.first, b.second);
  });
  for (int t = 0; t < K; ++t) put(t, row[t].first, row[t].second);
}

#endif
