//! Shared by every norm kernel of a .cu (emit_norm.py): Welford/Chan statistics and their merges.

#ifndef SC_NORM_H
#define SC_NORM_H
// Partial statistics of a set of values: count, mean, sum of squared deviations from the mean, and
// the mean's compensation c (the mean is mean + c). Why c: a row's partials are merged in chains
// (a thread's vectors, a block's threads in order, the row's partials), and each merge rounds the
// running mean by an ulp of |mean|, which is the row's distance from its shift K (the first
// element): over a row of 59,400 values (level 2's 23, a group norm's mean) the mean came out 2-9x
// further from float64 than ATen's on the CPU, and the output, a mean of normalised values (zero
// but for rounding), missed the fp64 referee's budget on every run. c keeps each merge's rounding
// (TwoSum, and the product's own by fma), so the merges' chains no longer add up their roundings.
// (The column shape's per-element Welford within a thread, norm_column.cuh colpart, is not
// compensated: a batch norm's thread chains still round as before; within 3x of the floor in
// tests/test_norm_mean_precision.py.)
#ifndef SC_WF_COMPENSATED
#define SC_WF_COMPENSATED 1  // (STITCHCUDA_NORM_COMPENSATED=0 sets it 0: the merges as before, for A/B runs)
#endif
struct sc_wf { float n, mean, m2, c; };
SC_INLINE sc_wf sc_wf_make(float n, float mean, float m2, float c = 0.0f) {
  sc_wf w; w.n = n; w.mean = mean; w.m2 = m2; w.c = c; return w;
}
// Chan et al.'s merge; stable for any sizes and means (no difference of large sums); compensated.
SC_INLINE sc_wf sc_wf_merge(sc_wf a, sc_wf b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  const float n = a.n + b.n, d = (b.mean - a.mean) + (b.c - a.c), f = b.n / n;
  if (!SC_WF_COMPENSATED) return sc_wf_make(n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f);
  const float inc = sc_mul_rn(d, f), s = a.mean + inc;  // (rounded apart: fused into s, TwoSum would not be exact)
  const float back = s - a.mean, err = (a.mean - (s - back)) + (inc - back);  // s + err == a.mean + inc
  return sc_wf_make(n, s, a.m2 + b.m2 + d * d * a.n * f, a.c + (err + fmaf(d, f, -inc)));
}
// K + the mean of values shifted by K, rounded once (as near the row's mean as a float gets): the
// shifted mean rounded first, then K added, was up to an ulp off.
SC_INLINE float sc_wf_unshift(float K, sc_wf w) {
  const float t = K + w.mean, back = t - K, err = (K - (t - back)) + (w.mean - back);
  return t + (err + w.c);
}
template <int VEC>
SC_INLINE sc_wf sc_wf_of(const float (&d)[VEC]) {  // exact two-pass over a vector in registers
  float s = 0.0f, q = 0.0f;
#pragma unroll
  for (int l = 0; l < VEC; ++l) s += d[l];
  const float m = s * (1.0f / VEC);
#pragma unroll
  for (int l = 0; l < VEC; ++l) q += (d[l] - m) * (d[l] - m);
  return sc_wf_make((float)VEC, m, q);
}
SC_INLINE sc_wf sc_merge(sc_wf a, sc_wf b) { return sc_wf_merge(a, b); }
SC_INLINE float sc_merge(float a, float b) { return a + b; }
// x as a norm kernel reads it: a pointer, or a prologue's loader (emit_norm: the pointwise ops before
// the norm computed as read, never stored) whose call with e gives row-major element e as a float.
template <class T> SC_INLINE float sc_nx_at(const T* x, int64_t i) { return sc_to_f(x[i]); }
template <class L> SC_INLINE float sc_nx_at(const L& ld, int64_t i) { return ld(i); }
template <int VEC, class T> SC_INLINE sc_vec<T, VEC> sc_nx_vec(const T* x, int64_t i) { return sc_load<VEC>(x + i); }
// Through a prologue's loader (codegen.Prologue): its inputs read at the element itself as vectors.
template <int VEC, class L> SC_INLINE sc_vec<float, VEC> sc_nx_vec(const L& ld, int64_t i) {
  return ld.template vec<VEC>(i);
}
template <class T> static bool sc_nx_aligned(const T* x, int n) { return sc_aligned(x, n); }
template <class L> static bool sc_nx_aligned(const L& ld, int n) { return ld.aligned(n); }
// The prelude's sc_grid sizes the elementwise passes; a .cu whose only kernels are fused norms has
// none, and the prelude stays as it is (GPU recordings are matched by the candidate's bytes).
[[maybe_unused]] static unsigned (*const sc_norm_grid)(int64_t) = &sc_grid;
// What a norm kernel stores of its normalised value v at element e: v itself, or an epilogue's
// functor (emit_norm: the pointwise ops after the norm, computed as it stores, their end stored).
struct sc_no_epilogue {
  SC_INLINE float operator()(int64_t, float v) const { return v; }
};
// A partial in scratch: four floats, its compensation kept (folded into the mean, the roundings of a
// row's few partials did not average out: half an ulp of its mean).
constexpr int SC_WF_FLOATS = 4;
SC_INLINE sc_wf sc_load_wf(const float* p) { return sc_wf_make(p[0], p[1], p[2], p[3]); }
SC_INLINE void sc_store_wf(float* p, sc_wf w) { p[0] = w.n; p[1] = w.mean; p[2] = w.m2; p[3] = w.c; }
#ifdef __CUDACC__
__device__ __forceinline__ float sc_shfl_xor(float a, int o) { return __shfl_xor_sync(0xffffffffu, a, o); }
__device__ __forceinline__ sc_wf sc_shfl_xor(sc_wf a, int o) {
  return sc_wf_make(sc_shfl_xor(a.n, o), sc_shfl_xor(a.mean, o), sc_shfl_xor(a.m2, o), sc_shfl_xor(a.c, o));
}
// Reduce over aligned groups of `width` threads (a power of two); every thread gets its group's
// result, bit-identical across the group (the lower half is always merged first). Called by all
// threads of the block alike; `sh` holds blockDim.x / 32 values and is only used past a warp.
template <class V>
__device__ __forceinline__ V sc_group_reduce(V a, int width, V* sh) {
  const int lane = threadIdx.x & 31;
  const int span = width < 32 ? width : 32;
  for (int o = 1; o < span; o <<= 1) {
    const V b = sc_shfl_xor(a, o);
    a = (lane & o) ? sc_merge(b, a) : sc_merge(a, b);
  }
  if (width > 32) {
    const int warp = threadIdx.x >> 5, per = width >> 5, first = warp - warp % per;
    __syncthreads();  // the previous reduction may still be reading sh
    if (lane == 0) sh[warp] = a;
    __syncthreads();
    a = sh[first];
    for (int i = 1; i < per; ++i) a = sc_merge(a, sh[first + i]);
  }
  return a;
}
#endif
#endif  // SC_NORM_H
