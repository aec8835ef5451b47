//! The split norm kernel shape (rows cut into chunks over many blocks; emit_norm.py, a
//! string.Template): $CH elements per chunk.

constexpr int64_t CH = ${CH}LL, P = (COUNT + CH - 1) / CH;  // chunk of a row per block
// Thread t's partial statistics of chunk p of row r (K: the row's shift).
template <int VEC>
SC_INLINE sc_wf part(const Args& a, int64_t r, int64_t p, int t, float K) {
  sc_wf acc = sc_wf_make(0.0f, 0.0f, 0.0f);
  const int64_t begin = p * CH, end = begin + CH < COUNT ? begin + CH : COUNT;
#pragma unroll 4
  for (int it = 0; it < (int)(CH / (THREADS * VEC)); ++it) {
    const int64_t k = begin + ((int64_t)it * THREADS + t) * VEC;
    if (k < end) acc = shifted_merge<VEC>(acc, sc_nx_vec<VEC>(a.x, addr(r, k)), K);
  }
  return acc;
}
template <int VEC>
SC_INLINE void apply_chunk(const Args& a, int64_t r, int64_t p, int t) {
  const float mean = a.stat[2 * r], rstd = a.stat[2 * r + 1];
  const int64_t begin = p * CH, end = begin + CH < COUNT ? begin + CH : COUNT;
#pragma unroll 4
  for (int it = 0; it < (int)(CH / (THREADS * VEC)); ++it) {
    const int64_t k = begin + ((int64_t)it * THREADS + t) * VEC;
    if (k < end) apply_vec<VEC>(a, r, k, mean, rstd);
  }
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) stats_kernel(Args a) {
  __shared__ sc_wf sh[THREADS / 32];
  // Rows fastest: the blocks running together share a slice of the weights (layer norm).
  const int64_t r = blockIdx.x % R, p = blockIdx.x / R;
  sc_wf s = part<VEC>(a, r, p, threadIdx.x, sc_nx_at(a.x, addr(r, 0)));
  s = sc_group_reduce(s, THREADS, sh);
  if (threadIdx.x == 0) sc_store_wf(a.part + SC_WF_FLOATS * (r * P + p), s);
}
template <int VEC>
__global__ void __launch_bounds__(THREADS) apply_kernel(Args a) {
  // Last chunks first: the statistics pass read them last, so they may still be in L2.
  const int64_t b = (int64_t)gridDim.x - 1 - blockIdx.x;
  apply_chunk<VEC>(a, b % R, b / R, threadIdx.x);
}
#endif
template <int VEC>
static void run_host_vec(const Args& a) {
  for (int64_t r = 0; r < R; ++r) {
    const float K = sc_nx_at(a.x, addr(r, 0));
    for (int64_t p = 0; p < P; ++p) {
      sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
      for (int t = 0; t < THREADS; ++t) s = sc_wf_merge(s, part<VEC>(a, r, p, t, K));
      sc_store_wf(a.part + SC_WF_FLOATS * (r * P + p), s);
    }
  }
  final_host(a, P);
  // (A plain if, neither an early return, after which nvcc warns the loop unreachable (#128), nor
  // if constexpr, whose discarded launch leaves the kernel template undefined (#20280).)
  if (HAS_Y) {
    for (int64_t b = 0; b < R * P; ++b)
      for (int t = 0; t < THREADS; ++t) apply_chunk<VEC>(a, b % R, b / R, t);
  }
}
static void run_host(const Args& a) {
  if (aligned(a, VMAX)) run_host_vec<VMAX>(a);
  else run_host_vec<1>(a);
}
#ifdef __CUDACC__
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  const unsigned grid = (unsigned)(R * P);
  if (vec) stats_kernel<VMAX><<<grid, THREADS, 0, stream>>>(a);
  else stats_kernel<1><<<grid, THREADS, 0, stream>>>(a);
  final_launch(a, P, stream);
  if (HAS_Y) {
    if (vec) apply_kernel<VMAX><<<grid, THREADS, 0, stream>>>(a);
    else apply_kernel<1><<<grid, THREADS, 0, stream>>>(a);
  }
}
#endif
