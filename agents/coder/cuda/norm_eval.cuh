//! The eval norm kernel shape (batch norm with the running statistics; emit_norm.py).

// Batch norm with the running statistics: per-channel mean and rstd, then elementwise.
SC_INLINE void prep(const Args& a, int64_t c) {
  a.stat[2 * c] = sc_to_f(a.rm[c]);
  a.stat[2 * c + 1] = 1.0f / sqrtf(sc_to_f(a.rv[c]) + EPS);
}
#ifdef __CUDACC__
__global__ void __launch_bounds__(THREADS) prep_kernel(Args a) {
  const int64_t c = (int64_t)blockIdx.x * THREADS + threadIdx.x;
  if (c < R) prep(a, c);
}
#endif
template <int VEC>
static void run_host_vec(const Args& a) {
  for (int64_t c = 0; c < R; ++c) prep(a, c);
  for (int64_t v = 0; v < NUMEL / VEC; ++v) ew_vec<VEC>(a, v * VEC);
}
static void run_host(const Args& a) {
  if (aligned(a, VMAX)) run_host_vec<VMAX>(a);
  else run_host_vec<1>(a);
}
#ifdef __CUDACC__
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  prep_kernel<<<(unsigned)((R + THREADS - 1) / THREADS), THREADS, 0, stream>>>(a);
  if (vec) ew_kernel<VMAX><<<ew_grid<VMAX>(), THREADS, 0, stream>>>(a);
  else ew_kernel<1><<<ew_grid<1>(), THREADS, 0, stream>>>(a);
}
#endif
