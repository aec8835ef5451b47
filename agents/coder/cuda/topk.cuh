//! Shared by every topk kernel of a .cu (emit_topk.py): the k largest (or smallest) values of each
//! row along one dim, and their indices, in order.
//!
//! A warp takes a row: each lane keeps, sorted, the best K of the elements it reads (every 32nd),
//! then K rounds of a warp-wide pick of the best head among the lanes write the results in order.
//! The order is total (value, then the lower index first on ties; NaN counts as larger than any
//! number, as PyTorch orders it), so the result does not depend on how the row was split: the CPU
//! entry scans each row as one lane and writes the same values and indices.

#ifndef SC_TOPK_H
#define SC_TOPK_H

// A row's sort key: float for the floating types (half and bfloat16 exactly so), the integer itself
// for int64 and int32; and back.
SC_INLINE long long sc_sort_key(long long v) { return v; }
SC_INLINE long long sc_sort_key(long v) { return v; }
SC_INLINE int sc_sort_key(int v) { return v; }
template <class T> SC_INLINE float sc_sort_key(T v) { return sc_to_f(v); }
template <class T> SC_INLINE T sc_from_key(float k) { return sc_from_f<T>(k); }
template <class T> SC_INLINE T sc_from_key(long long k) { return (T)k; }
template <class T> SC_INLINE T sc_from_key(int k) { return (T)k; }

// Whether (a, ia) comes before (b, ib) in the result (K: float, or an integer key, which is never NaN).
template <bool LARGEST, class K>
SC_INLINE bool sc_topk_before(K a, long long ia, K b, long long ib) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return LARGEST ? na : nb;  // NaN first among the largest, last among the smallest
  if (!na && a != b) return LARGEST ? a > b : a < b;
  return ia < ib;
}

// The best K of what one lane has seen, sorted.
template <int K, bool LARGEST>
struct sc_topk_list {
  float v[K];
  long long i[K];
  int n;
  SC_INLINE void push(float x, long long ix) {
    if (n == K && !sc_topk_before<LARGEST>(x, ix, v[K - 1], i[K - 1])) return;
    int p = n < K ? n : K - 1;  // the slot x may take (the last one is dropped when full)
    while (p > 0 && sc_topk_before<LARGEST>(x, ix, v[p - 1], i[p - 1])) {
      v[p] = v[p - 1];
      i[p] = i[p - 1];
      --p;
    }
    v[p] = x;
    i[p] = ix;
    if (n < K) ++n;
  }
};

// One lane's scan of row elements first, first + step, ... < count; element j at x[base + j * stride].
template <int K, bool LARGEST, class T>
SC_INLINE void sc_topk_scan(sc_topk_list<K, LARGEST>& list, const T* x, long long base, long long stride,
                            long long first, long long step, long long count) {
  list.n = 0;
  for (long long j = first; j < count; j += step) list.push(sc_to_f(x[base + j * stride]), j);
}

#ifdef __CUDACC__
// K rounds of the warp's best head; `put(t, value, index)` writes result t (lane 0).
template <int K, bool LARGEST, class Put>
__device__ __forceinline__ void sc_topk_warp_merge(const sc_topk_list<K, LARGEST>& list, Put put) {
  const int lane = threadIdx.x & 31;
  int h = 0;
  for (int t = 0; t < K; ++t) {
    const bool has = h < list.n;
    float v = has ? list.v[h] : 0.f;
    long long ix = has ? list.i[h] : -1;
    int owner = has ? lane : -1;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, d);
      const long long oi = __shfl_xor_sync(0xffffffffu, ix, d);
      const int oo = __shfl_xor_sync(0xffffffffu, owner, d);
      // A lane without a head (owner -1) loses to any lane with one.
      if (oo >= 0 && (owner < 0 || sc_topk_before<LARGEST>(ov, oi, v, ix))) v = ov, ix = oi, owner = oo;
    }
    if (lane == owner) ++h;
    if (lane == 0) put(t, v, ix);
  }
}
#endif

// The CPU entry's row: one lane reads all of it, its list is the result.
template <int K, bool LARGEST, class T, class Put>
static void sc_topk_row_host(const T* x, long long base, long long stride, long long count, Put put) {
  sc_topk_list<K, LARGEST> list;
  sc_topk_scan<K, LARGEST>(list, x, base, stride, 0, 1, count);
  for (int t = 0; t < K; ++t) put(t, list.v[t], list.i[t]);
}
#endif
