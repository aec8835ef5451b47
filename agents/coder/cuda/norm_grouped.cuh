//! The grouped norm kernel shape (group norm over channels-last storage; emit_norm.py, a
//! string.Template): $TCV and $TC1 threads across a row of channel vectors (VEC = VMAX and 1),
//! $PS slices of each sample's rows.

// Storage [NS, HW, C]; statistics row r = (n, g) is the HW x PER block of sample n's rows at channels
// g*PER..: every thread reads VEC adjacent channels (one group's, PER % VEC == 0) down a slice of the
// sample's rows, so a warp reads whole rows of C channels (coalesced), where the split shape read
// each group's runs of PER channels C apart and fetched sectors for other groups' blocks. Partials
// are per (row, slice), merged by final_kernel as the split shape's are.
constexpr int64_t C = SEG_STRIDE, PER = S, G = ROW_GROUP, HW = COUNT / S, NS = R / G;
constexpr int64_t PS = ${PS}LL, P = PS, RCH = (HW + PS - 1) / PS;  // slices of a sample's rows
static_assert(C % PER == 0 && R % G == 0 && COUNT % PER == 0, "group norm rows");
template <int VEC> SC_INLINE constexpr int tc() { return VEC == VMAX ? ${TCV} : ${TC1}; }
template <int VEC> SC_INLINE constexpr int64_t tiles() { return (C + tc<VEC>() * VEC - 1) / (tc<VEC>() * VEC); }
// Thread t's statistics in block (tile, n, ps), of values shifted by its group's K.
template <int VEC>
SC_INLINE sc_wf grouped_part(const Args& a, int64_t tile, int64_t n, int64_t ps, int t) {
  constexpr int TC = tc<VEC>(), TR = THREADS / TC;
  const int64_t c0 = (tile * TC + t % TC) * VEC;
  sc_wf acc = sc_wf_make(0.0f, 0.0f, 0.0f);
  if (t >= TC * TR || c0 >= C) return acc;
  const int64_t g = c0 / PER, r = n * G + g;
  const float K = sc_nx_at(a.x, addr(r, 0));
  const int64_t s1 = (ps + 1) * RCH < HW ? (ps + 1) * RCH : HW;
  for (int64_t s = ps * RCH + t / TC; s < s1; s += TR)
    acc = shifted_merge<VEC>(acc, sc_nx_vec<VEC>(a.x, (n * HW + s) * C + c0), K);
  return acc;
}
// The block's partial of group g (in tile `tile`): its threads' statistics merged in thread order.
// They are threads k * TC + col for rows k < TR and the group's PER / VEC columns.
template <int VEC>
SC_INLINE sc_wf grouped_merge(const sc_wf* w, int64_t tile, int64_t g) {
  constexpr int TC = tc<VEC>(), TR = THREADS / TC;
  constexpr int64_t GV = PER / VEC;
  const int64_t col0 = g * GV - tile * TC;
  sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
  for (int k = 0; k < TR; ++k)
    for (int64_t col = col0; col < col0 + GV; ++col) s = sc_wf_merge(s, w[k * TC + col]);
  return s;
}
// Groups whose channels lie in tile `tile` (tiles hold whole groups: emit_norm checks it).
template <int VEC> SC_INLINE int64_t first_group(int64_t tile) { return tile * tc<VEC>() * VEC / PER; }
template <int VEC> SC_INLINE int64_t end_group(int64_t tile) {
  const int64_t c1 = (tile + 1) * tc<VEC>() * VEC;
  return (c1 < C ? c1 : C) / PER;
}
// Elementwise normalisation in storage order: element i is channel i % C of sample i / (HW * C).
template <int VEC>
SC_INLINE void grouped_apply(const Args& a, int64_t i) {
  if constexpr (!HAS_Y) return;
  const int64_t c = i % C, r = (i / (HW * C)) * G + c / PER;
  const float mean = a.stat[2 * r], rstd = a.stat[2 * r + 1];
  const sc_vec<XV, VEC> xv = sc_nx_vec<VEC>(a.x, i);
  sc_vec<YT, VEC> yv;
#pragma unroll
  for (int l = 0; l < VEC; ++l) yv.v[l] = sc_from_f<YT>(a.ep(i + l, affine(a, sc_to_f(xv.v[l]), mean, rstd, c + l)));
  sc_store<VEC>(a.y + i, yv);
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) grouped_stats_kernel(Args a) {
  __shared__ sc_wf sh[THREADS];
  const int64_t tile = blockIdx.x % tiles<VEC>(), rest = blockIdx.x / tiles<VEC>(), n = rest % NS, ps = rest / NS;
  sh[threadIdx.x] = grouped_part<VEC>(a, tile, n, ps, threadIdx.x);
  __syncthreads();
  const int64_t g0 = first_group<VEC>(tile), g1 = end_group<VEC>(tile);
  for (int64_t j = g0 + threadIdx.x; j < g1; j += THREADS)
    sc_store_wf(a.part + SC_WF_FLOATS * ((n * G + j) * P + ps), grouped_merge<VEC>(sh, tile, j));
}
template <int VEC>
__global__ void __launch_bounds__(THREADS) grouped_apply_kernel(Args a) {
  const int64_t step = (int64_t)gridDim.x * THREADS;
  for (int64_t v = (int64_t)blockIdx.x * THREADS + threadIdx.x; v < NUMEL / VEC; v += step)
    grouped_apply<VEC>(a, v * VEC);
}
#endif
template <int VEC>
static void run_host_vec(const Args& a) {
  sc_wf w[THREADS];
  for (int64_t b = 0; b < tiles<VEC>() * NS * PS; ++b) {
    const int64_t tile = b % tiles<VEC>(), rest = b / tiles<VEC>(), n = rest % NS, ps = rest / NS;
    for (int t = 0; t < THREADS; ++t) w[t] = grouped_part<VEC>(a, tile, n, ps, t);
    for (int64_t j = first_group<VEC>(tile); j < end_group<VEC>(tile); ++j)
      sc_store_wf(a.part + SC_WF_FLOATS * ((n * G + j) * P + ps), grouped_merge<VEC>(w, tile, j));
  }
  final_host(a, P);
  for (int64_t v = 0; v < NUMEL / VEC; ++v) grouped_apply<VEC>(a, v * VEC);
}
static void run_host(const Args& a) {
  if (aligned(a, VMAX)) run_host_vec<VMAX>(a);
  else run_host_vec<1>(a);
}
#ifdef __CUDACC__
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  if (vec) grouped_stats_kernel<VMAX><<<(unsigned)(tiles<VMAX>() * NS * PS), THREADS, 0, stream>>>(a);
  else grouped_stats_kernel<1><<<(unsigned)(tiles<1>() * NS * PS), THREADS, 0, stream>>>(a);
  final_launch(a, P, stream);
  if (HAS_Y) {  // (a block: see norm_split.cuh's run_host_vec)
    if (vec) grouped_apply_kernel<VMAX><<<sc_norm_grid(NUMEL / VMAX), THREADS, 0, stream>>>(a);
    else grouped_apply_kernel<1><<<sc_norm_grid(NUMEL), THREADS, 0, stream>>>(a);
  }
}
#endif
