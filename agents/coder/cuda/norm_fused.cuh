//! The fused norm kernel shape (a row in registers; emit_norm.py, a string.Template): $TPR threads
//! per row, $RB rows per block.

constexpr int TPR = $TPR, RB = $RB, FB = TPR * RB;
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(FB) fused_kernel(Args a) {
  constexpr int ITEMS = (int)((COUNT + TPR * VEC - 1) / (TPR * VEC));
  __shared__ float sh[FB / 32 > 0 ? FB / 32 : 1];
  const int t = threadIdx.x % TPR;
  const int64_t r0 = (int64_t)blockIdx.x * RB + threadIdx.x / TPR;
  const bool live = r0 < R;
  const int64_t r = live ? r0 : R - 1;  // spare groups redo the last row: reductions stay uniform
  const float K = sc_nx_at(a.x, addr(r, 0));
  sc_vec<XV, VEC> v[ITEMS];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int64_t k = ((int64_t)i * TPR + t) * VEC;
    if (k < COUNT) {
      v[i] = sc_nx_vec<VEC>(a.x, addr(r, k));
#pragma unroll
      for (int l = 0; l < VEC; ++l) s += sc_to_f(v[i].v[l]) - K;
    }
  }
  s = sc_group_reduce(s, TPR, sh);
  const float mean = K + s / COUNTF;
  float q = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (((int64_t)i * TPR + t) * VEC < COUNT) {
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const float e = sc_to_f(v[i].v[l]) - mean;
        q += e * e;
      }
    }
  }
  q = sc_group_reduce(q, TPR, sh);
  const float rstd = rstd_of(mean, q);
  if (!live) return;
  if (t == 0) record(a, r, mean, q, rstd);
  const float m = RMS ? 0.0f : mean;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int64_t k = ((int64_t)i * TPR + t) * VEC;
    if (k < COUNT) normalise<VEC>(a, r, k, v[i], m, rstd);
  }
}
#endif
static void run_host(const Args& a) {
  for (int64_t r = 0; r < R; ++r) {
    const float K = sc_nx_at(a.x, addr(r, 0));
    float s = 0.0f, q = 0.0f;
    for (int64_t k = 0; k < COUNT; ++k) s += sc_nx_at(a.x, addr(r, k)) - K;
    const float mean = K + s / COUNTF;
    for (int64_t k = 0; k < COUNT; ++k) {
      const float e = sc_nx_at(a.x, addr(r, k)) - mean;
      q += e * e;
    }
    const float rstd = rstd_of(mean, q);
    record(a, r, mean, q, rstd);
    for (int64_t k = 0; k < COUNT; ++k) apply_vec<1>(a, r, k, RMS ? 0.0f : mean, rstd);
  }
}
#ifdef __CUDACC__
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  const unsigned grid = (unsigned)((R + RB - 1) / RB);
  if (vec) fused_kernel<VMAX><<<grid, FB, 0, stream>>>(a);
  else fused_kernel<1><<<grid, FB, 0, stream>>>(a);
}
#endif
