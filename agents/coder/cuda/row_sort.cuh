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
template <bool LARGEST, class K>
__device__ __forceinline__ void sc_row_sort_block(K* key, int* ix, int P) {
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
          const K kv = key[t];
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

// The entry a one-pick sort writes, from its sorted (ascending) row's first NaN (n if none): RULE 0
// the position AT; 1 (torch.median) AT, the lower median, unless the row holds NaN, then its first
// NaN; 2 (torch.nanmedian) the lower median of the entries before the first NaN (the first NaN where
// every entry is one).
SC_INLINE int sc_row_pick_from(int nan_at, int n, int at, int rule) {
  if (rule == 0) return at;
  if (rule == 1) return nan_at < n ? nan_at : at;
  return nan_at > 0 ? (nan_at - 1) / 2 : 0;
}

// The same on a block's sorted keys: NaN sort last, so a binary search finds the first.
template <class K>
SC_INLINE int sc_row_pick(const K* key, int n, int at, int rule) {
  if (rule == 0) return at;
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (key[mid] != key[mid]) hi = mid; else lo = mid + 1;
  }
  return sc_row_pick_from(lo, n, at, rule);
}

// The CPU entry's row: all of it read, sorted by the same order, K entries written by `put` from the
// one sc_row_pick_from names (for a plain sort or topk: rule 0 at 0, the first K).
template <bool LARGEST, class T, class Put>
static void sc_row_sort_host(const T* x, long long base, long long stride, long long count, int K, int at, int rule,
                             Put put) {
  using Key = decltype(sc_sort_key(x[0]));
  std::vector<std::pair<Key, long long>> row(count);
  for (long long j = 0; j < count; ++j) row[j] = {sc_sort_key(x[base + j * stride]), j};
  std::sort(row.begin(), row.end(), [](const std::pair<Key, long long>& a, const std::pair<Key, long long>& b) {
    return sc_topk_before<LARGEST>(a.first, a.second, b.first, b.second);
  });
  int nan_at = 0;
  while (nan_at < count && row[nan_at].first == row[nan_at].first) ++nan_at;
  const int first = sc_row_pick_from(nan_at, (int)count, at, rule);
  for (int t = 0; t < K; ++t) put(t, row[first + t].first, row[first + t].second);
}

#endif
