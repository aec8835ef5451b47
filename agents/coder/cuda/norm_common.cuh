//! One norm kernel's description (emit_norm.py, a string.Template): types, sizes, addressing and the
//! per-thread helpers every kernel shape uses. $N is the kernel's name; the other $NAMES are its
//! types, sizes and flags (emit_norm._build's `subs`).

namespace ${N}_impl {
typedef $XT XT; typedef $YT YT; typedef $WT WT; typedef $BT BT; typedef $RMT RMT; typedef $RVT RVT;
typedef $XV XV;  // what x's elements are read as: XT, or float from a prologue
$LOADER
typedef $XS XS;
typedef $MT MT; typedef $ST ST; typedef $RMDT RMDT; typedef $RVDT RVDT;
$EPILOGUE
typedef $EPT EPT;  // what is stored of the normalised value (sc_no_epilogue: the value)
constexpr int THREADS = $THREADS, VMAX = $VMAX;
constexpr int64_t R = ${R}LL, COUNT = ${COUNT}LL, S = ${S}LL, SEG_STRIDE = ${SEG_STRIDE}LL;
constexpr int64_t ROW_STRIDE = ${ROW_STRIDE}LL, RUN = ${RUN}LL, NUMEL = ${NUMEL}LL;
constexpr int64_t ROW_GROUP = ${ROW_GROUP}LL, ROW_OUTER = ${ROW_OUTER}LL;  // 0: rows ROW_STRIDE apart
constexpr int64_t RGD = ROW_GROUP > 0 ? ROW_GROUP : 1;  // a divisor in the branch ROW_GROUP = 0 discards
static_assert(NUMEL > 0 && R > 0, "a norm of no elements");  // (also: NUMEL is read by every shape)
constexpr bool SEGMENTED = $SEGMENTED, RMS = $RMS, HAS_W = $HAS_W, HAS_B = $HAS_B;
constexpr bool HAS_MEAN = $HAS_MEAN, HAS_RSTD = $HAS_RSTD, UPDATE = $UPDATE;
// false: no normalised result is read (statistics only): the normalising passes write nothing.
constexpr bool HAS_Y = $HAS_Y;
constexpr float COUNTF = $COUNTF, COUNT_M1F = $COUNT_M1F, EPS = $EPS, MOMENTUM = $MOMENTUM;

struct Args {
  XS x; const WT* w; const BT* b; const RMT* rm; const RVT* rv;
  YT* y; MT* mean; ST* rstd; RMDT* rm_dst; RVDT* rv_dst;
  float* part;  // partial statistics, SC_WF_FLOATS floats per (row, chunk)
  float* stat;  // per row: mean (0 for RMS norm) and rstd, as the normalising pass uses them
  EPT ep;
};

SC_INLINE int64_t row_start(int64_t r) {
  if constexpr (ROW_GROUP > 0) return (r / RGD) * ROW_OUTER + (r % RGD) * ROW_STRIDE;
  else return r * ROW_STRIDE;
}
SC_INLINE int64_t addr(int64_t r, int64_t k) {  // element k of row r
  if constexpr (SEGMENTED) return row_start(r) + (k / S) * SEG_STRIDE + k % S;
  else return row_start(r) + k;
}
SC_INLINE int64_t pidx(int64_t r, int64_t k) { (void)r; (void)k; return $PIDX; }
SC_INLINE float affine(const Args& a, float x, float mean, float rstd, int64_t p) {
  float y = (x - mean) * rstd;
  if constexpr (HAS_W) y = y * sc_to_f(a.w[p]);
  if constexpr (HAS_B) y = y + sc_to_f(a.b[p]);
  (void)a; (void)p;
  return y;
}
// Normalise the vector xv of row r's elements k..k+VEC-1 (k a multiple of VEC) and store it.
template <int VEC>
SC_INLINE void normalise(const Args& a, int64_t r, int64_t k, const sc_vec<XV, VEC>& xv, float mean, float rstd) {
  if constexpr (!HAS_Y) return;
  const int64_t p0 = pidx(r, k), e0 = addr(r, k);  // a vector never leaves a run: e0 + l is element k + l
  sc_vec<YT, VEC> yv;
  if constexpr (RUN == 0) {  // per-element weights (layer norm): whole vectors of them
    sc_vec<WT, VEC> wv;
    sc_vec<BT, VEC> bv;
    if constexpr (HAS_W) wv = sc_load<VEC>(a.w + p0);
    if constexpr (HAS_B) bv = sc_load<VEC>(a.b + p0);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      float y = (sc_to_f(xv.v[l]) - mean) * rstd;
      if constexpr (HAS_W) y = y * sc_to_f(wv.v[l]);
      if constexpr (HAS_B) y = y + sc_to_f(bv.v[l]);
      yv.v[l] = sc_from_f<YT>(a.ep(e0 + l, y));
    }
  } else {
#pragma unroll
    for (int l = 0; l < VEC; ++l) {  // the channel is constant over runs of RUN elements
      const int64_t p = RUN % VEC == 0 ? p0 : pidx(r, k + l);
      yv.v[l] = sc_from_f<YT>(a.ep(e0 + l, affine(a, sc_to_f(xv.v[l]), mean, rstd, p)));
    }
  }
  sc_store<VEC>(a.y + e0, yv);
}
// Whole vectors of x, y (and of w, b when they follow the element) are aligned (asked on the host).
static bool aligned(const Args& a, int vec) {
  const bool wb = RUN != 0 || ((!HAS_W || sc_aligned(a.w, vec)) && (!HAS_B || sc_aligned(a.b, vec)));
  return vec > 1 && sc_nx_aligned(a.x, vec) && sc_aligned(a.y, vec) && wb;
}
// acc merged with the VEC values of v less the row's shift K (the statistics passes' step).
template <int VEC>
SC_INLINE sc_wf shifted_merge(sc_wf acc, const sc_vec<XV, VEC>& v, float K) {
  float d[VEC];
#pragma unroll
  for (int l = 0; l < VEC; ++l) d[l] = sc_to_f(v.v[l]) - K;
  return sc_wf_merge(acc, sc_wf_of<VEC>(d));
}
SC_INLINE float rstd_of(float mean, float m2) {
  const float var = m2 / COUNTF;
  return 1.0f / sqrtf((RMS ? var + mean * mean : var) + EPS);
}
// Row r's statistics are final: store the ones the graph reads, update the running statistics.
SC_INLINE void record(const Args& a, int64_t r, float mean, float m2, float rstd) {
  if constexpr (HAS_MEAN) a.mean[r] = sc_from_f<MT>(mean);
  if constexpr (HAS_RSTD) a.rstd[r] = sc_from_f<ST>(rstd);
  if constexpr (UPDATE) {
    a.rm_dst[r] = sc_from_f<RMDT>(MOMENTUM * mean + (1.0f - MOMENTUM) * sc_to_f(a.rm[r]));
    a.rv_dst[r] = sc_from_f<RVDT>(MOMENTUM * (m2 / COUNT_M1F) + (1.0f - MOMENTUM) * sc_to_f(a.rv[r]));
  }
  (void)a; (void)r; (void)mean; (void)m2; (void)rstd;
}
template <int VEC>
SC_INLINE void apply_vec(const Args& a, int64_t r, int64_t k, float mean, float rstd) {
  if constexpr (!HAS_Y) return;
  normalise<VEC>(a, r, k, sc_nx_vec<VEC>(a.x, addr(r, k)), mean, rstd);
}
// Merge the P partials of row r and finish it (stat gets what the normalising pass needs).
SC_INLINE void finish_row(const Args& a, int64_t r, sc_wf s) {
  const float mean = sc_wf_unshift(sc_nx_at(a.x, addr(r, 0)), s);
  const float rstd = rstd_of(mean, s.m2);
  record(a, r, mean, s.m2, rstd);
  a.stat[2 * r] = RMS ? 0.0f : mean;
  a.stat[2 * r + 1] = rstd;
}
#ifdef __CUDACC__
// FW threads merge the P partials of a row: a warp when P is small, a block for thousands.
template <int FW>
__global__ void __launch_bounds__(THREADS) final_kernel(Args a, int64_t P) {
  __shared__ sc_wf sh[THREADS / 32];
  const int64_t r0 = (int64_t)blockIdx.x * (THREADS / FW) + threadIdx.x / FW;
  const int64_t r = r0 < R ? r0 : R - 1;  // spare groups redo the last row: reductions stay uniform
  const int t = threadIdx.x % FW;
  sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
  for (int64_t j = t; j < P; j += FW) s = sc_wf_merge(s, sc_load_wf(a.part + SC_WF_FLOATS * (r * P + j)));
  s = sc_group_reduce(s, FW, sh);
  if (t == 0 && r0 < R) finish_row(a, r, s);
}
[[maybe_unused]] static void final_launch(const Args& a, int64_t P, cudaStream_t stream) {
  if (P > 256) final_kernel<THREADS><<<(unsigned)R, THREADS, 0, stream>>>(a, P);
  else final_kernel<32><<<(unsigned)((R + THREADS / 32 - 1) / (THREADS / 32)), THREADS, 0, stream>>>(a, P);
}
#endif
[[maybe_unused]] static void final_host(const Args& a, int64_t P) {
  for (int64_t r = 0; r < R; ++r) {
    sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
    for (int64_t j = 0; j < P; ++j) s = sc_wf_merge(s, sc_load_wf(a.part + SC_WF_FLOATS * (r * P + j)));
    finish_row(a, r, s);
  }
}
// Elementwise normalisation of a [N, C=R, S] tensor with per-channel stat (batch norm).
template <int VEC>
SC_INLINE void ew_vec(const Args& a, int64_t i) {
  if constexpr (!HAS_Y) return;
  const sc_vec<XV, VEC> xv = sc_nx_vec<VEC>(a.x, i);
  sc_vec<YT, VEC> yv;
  const int64_t c0 = (i / S) % R;
#pragma unroll
  for (int l = 0; l < VEC; ++l) {
    int64_t c = c0;
    if constexpr (S == 1 && R % VEC == 0) c = c0 + l;
    else if constexpr (S % VEC != 0) c = ((i + l) / S) % R;
    yv.v[l] = sc_from_f<YT>(a.ep(i + l, affine(a, sc_to_f(xv.v[l]), a.stat[2 * c], a.stat[2 * c + 1], c)));
  }
  sc_store<VEC>(a.y + i, yv);
}
// Whether a thread's vectors all lie on the same channels: channels innermost (S == 1), whole vectors
// of them, and a grid-stride step that is a multiple of the channel count (ew_grid picks such a grid).
template <int VEC>
SC_INLINE constexpr bool ew_fixed_channels() { return S == 1 && R % VEC == 0; }
SC_INLINE constexpr int64_t ew_gcd(int64_t a, int64_t b) {
  while (b) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) ew_kernel(Args a) {
  if constexpr (!HAS_Y) return;
  const int64_t step = (int64_t)gridDim.x * THREADS;
  int64_t v = (int64_t)blockIdx.x * THREADS + threadIdx.x;
  if constexpr (ew_fixed_channels<VEC>()) {
    if ((step * VEC) % R == 0 || step >= NUMEL / VEC) {
      // The channels' statistics, weight and bias read once a thread, not once an element: per
      // element they were four loads beside one of data, and the pass ran at half of what a copy
      // reaches (level 2's 11 and 52, 2026-11-28). The formula stays ((x - mean) * rstd) * w + b.
      if (v >= NUMEL / VEC) return;
      const int64_t c0 = (v * VEC) % R;
      float mean[VEC], rstd[VEC], w[VEC], b[VEC];
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        mean[l] = a.stat[2 * (c0 + l)];
        rstd[l] = a.stat[2 * (c0 + l) + 1];
        w[l] = HAS_W ? sc_to_f(a.w[c0 + l]) : 1.0f;
        b[l] = HAS_B ? sc_to_f(a.b[c0 + l]) : 0.0f;
      }
      auto put = [&](int64_t i, const sc_vec<XV, VEC>& xv) {
        sc_vec<YT, VEC> yv;
#pragma unroll
        for (int l = 0; l < VEC; ++l) {
          float y = (sc_to_f(xv.v[l]) - mean[l]) * rstd[l];
          if constexpr (HAS_W) y = y * w[l];
          if constexpr (HAS_B) y = y + b[l];
          yv.v[l] = sc_from_f<YT>(a.ep(i + l, y));
        }
        sc_store<VEC>(a.y + i, yv);
      };
      // U loads in flight a thread before their stores: with a few waves of blocks instead
      // of one vector a thread, one load at a time left the pass below a copy's bandwidth on 16 and
      // 32 channels (level 2's 72 and 15, 2026-11-28).
      constexpr int U = 4;  // (a local: a namespace constant warns where no ew_kernel is built)
      for (; v + (U - 1) * step < NUMEL / VEC; v += U * step) {
        sc_vec<XV, VEC> xv[U];
#pragma unroll
        for (int u = 0; u < U; ++u) xv[u] = sc_nx_vec<VEC>(a.x, (v + u * step) * VEC);
#pragma unroll
        for (int u = 0; u < U; ++u) put((v + u * step) * VEC, xv[u]);
      }
      for (; v < NUMEL / VEC; v += step) put(v * VEC, sc_nx_vec<VEC>(a.x, v * VEC));
      return;
    }
  }
  for (; v < NUMEL / VEC; v += step) ew_vec<VEC>(a, v * VEC);
}
// ew_kernel's grid: where a thread keeps its channels, a few waves of blocks whose grid-stride step
// is a multiple of the channel count (each thread then loops over several vectors of the same
// channels); otherwise one vector a thread, as sc_grid gives.
template <int VEC>
static unsigned ew_grid() {
  const unsigned all = sc_grid(NUMEL / VEC);
  if constexpr (ew_fixed_channels<VEC>()) {
    // The SM count asked as sc_grid asks it (not shared through the prelude: every candidate's sources
    // include the prelude, and the example's GPU recording is keyed by its sources).
    static int sms = 0;
    if (sms <= 0) {
      int dev = 0, n = 0;
      if (cudaGetDevice(&dev) == cudaSuccess &&
          cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
        sms = n;
    }
    constexpr int64_t unit = R / ew_gcd(R, (int64_t)THREADS * VEC);  // blocks come in multiples of it
    const int64_t cap = (int64_t)(sms > 0 ? sms : 1) * 8 / unit * unit;
    if (cap >= unit && (int64_t)all > cap) return (unsigned)cap;
  }
  return all;
}
#endif
