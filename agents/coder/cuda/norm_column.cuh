//! The column norm kernel shape (batch norm over [N, C]; emit_norm.py, a string.Template): $RCH
//! rows per slice.

// Batch norm over [NB, C=R]: blocks of LPR*VEC adjacent channels times a slice of RCH rows.
constexpr int64_t NB = COUNT, RCH = ${RCH}LL, P = (NB + RCH - 1) / RCH;
constexpr int WARPS = THREADS / 32;
// Lanes a row takes: the fewest (a power of two up to 32) that cover its channels VEC at a time;
// the warp's other lanes take the next rows. Why: with one row a warp, 16 channels of 4-wide vectors
// kept 4 of 32 lanes busy (level 2's 72, a 3-D batch norm: 1.6 ms against Triton's 0.54 ms).
template <int VEC> SC_INLINE constexpr int lpr() {
  int p = 1;
  while (p < 32 && (int64_t)p * VEC < R) p *= 2;
  return p;
}
template <int VEC> SC_INLINE constexpr int rpw() { return 32 / lpr<VEC>(); }  // rows a warp reads at once
template <int VEC> SC_INLINE constexpr int64_t tiles() { return (R + lpr<VEC>() * VEC - 1) / (lpr<VEC>() * VEC); }
// Welford down rows n0, n0 + step, ... < n1 of channels c0..c0+VEC-1 (shifted by their row 0).
template <int VEC>
SC_INLINE void colpart(const Args& a, int64_t c0, int64_t n0, int64_t n1, int step, sc_wf (&w)[VEC]) {
  float K[VEC], mean[VEC], m2[VEC], cnt = 0.0f;
#pragma unroll
  for (int l = 0; l < VEC; ++l) {
    K[l] = c0 + l < R ? sc_nx_at(a.x, c0 + l) : 0.0f;
    mean[l] = m2[l] = 0.0f;
  }
  if (c0 < R) {
    for (int64_t n = n0; n < n1; n += step) {
      const sc_vec<XV, VEC> v = sc_nx_vec<VEC>(a.x, n * R + c0);
      cnt += 1.0f;
      const float inv = 1.0f / cnt;
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const float d = sc_to_f(v.v[l]) - K[l], e = d - mean[l];
        mean[l] += e * inv;
        m2[l] += e * (d - mean[l]);
      }
    }
  }
#pragma unroll
  for (int l = 0; l < VEC; ++l) w[l] = sc_wf_make(cnt, mean[l], m2[l]);
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) colstats_kernel(Args a) {
  __shared__ sc_wf sh[WARPS][32 * VEC];
  constexpr int L = lpr<VEC>(), RW = rpw<VEC>();
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5, sub = tx / L, cl = tx % L;
  const int64_t tile = blockIdx.x % tiles<VEC>(), p = blockIdx.x / tiles<VEC>();
  const int64_t n0 = p * RCH, n1 = n0 + RCH < NB ? n0 + RCH : NB;
  sc_wf w[VEC];
  colpart<VEC>(a, (tile * L + cl) * VEC, n0 + ty * RW + sub, n1, WARPS * RW, w);
#pragma unroll
  for (int l = 0; l < VEC; ++l) sh[ty][tx * VEC + l] = w[l];
  __syncthreads();
  for (int j = threadIdx.x; j < L * VEC; j += THREADS) {
    const int64_t c = tile * L * VEC + j;
    if (c < R) {
      sc_wf s = sh[0][j];
      for (int y = 0; y < WARPS; ++y)
        for (int r = y == 0 ? 1 : 0; r < RW; ++r) s = sc_wf_merge(s, sh[y][r * L * VEC + j]);
      sc_store_wf(a.part + SC_WF_FLOATS * (c * P + p), s);
    }
  }
}
#endif
template <int VEC>
static void run_host_vec(const Args& a) {
  for (int64_t p = 0; p < P; ++p) {
    const int64_t n0 = p * RCH, n1 = n0 + RCH < NB ? n0 + RCH : NB;
    constexpr int L = lpr<VEC>(), RW = rpw<VEC>();
    for (int64_t tile = 0; tile < tiles<VEC>(); ++tile)
      for (int cl = 0; cl < L; ++cl) {
        const int64_t c0 = (tile * L + cl) * VEC;
        sc_wf s[VEC], w[VEC];
        for (int ty = 0; ty < WARPS; ++ty)
          for (int sub = 0; sub < RW; ++sub) {
            colpart<VEC>(a, c0, n0 + ty * RW + sub, n1, WARPS * RW, w);
            for (int l = 0; l < VEC; ++l) s[l] = ty == 0 && sub == 0 ? w[l] : sc_wf_merge(s[l], w[l]);
          }
        for (int l = 0; l < VEC; ++l)
          if (c0 + l < R) sc_store_wf(a.part + SC_WF_FLOATS * ((c0 + l) * P + p), s[l]);
      }
  }
  final_host(a, P);
  for (int64_t v = 0; v < NUMEL / VEC; ++v) ew_vec<VEC>(a, v * VEC);
}
static void run_host(const Args& a) {
  if (aligned(a, VMAX)) run_host_vec<VMAX>(a);
  else run_host_vec<1>(a);
}
#ifdef __CUDACC__
template <int VEC>
static void run_device_vec(const Args& a, cudaStream_t stream) {
  colstats_kernel<VEC><<<(unsigned)(tiles<VEC>() * P), THREADS, 0, stream>>>(a);
  final_launch(a, P, stream);
  if constexpr (HAS_Y) ew_kernel<VEC><<<ew_grid<VEC>(), THREADS, 0, stream>>>(a);
}
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  if (vec) run_device_vec<VMAX>(a, stream);
  else run_device_vec<1>(a, stream);
}
#endif
