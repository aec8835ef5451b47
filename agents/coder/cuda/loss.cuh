//! Shared by every loss kernel of a .cu (emit_loss.py): block sums of (loss, weight) terms, the
//! partial, final and elementwise kernels, and their serial CPU twin.

#ifndef SC_LOSS_H
#define SC_LOSS_H
// Losses (emit_loss.py): fp32 per-element (loss, weight) terms, summed in double (as reduce.cuh's
// sums are, and why): a weight total past 2^24 also stays exact, where a float count stops.
#define SC_LOSS_BLOCK 256

__device__ __forceinline__ void sc_loss_block_sum(double& l, double& w) {
  __shared__ double sl[SC_LOSS_BLOCK / 32], sw[SC_LOSS_BLOCK / 32];
  for (int d = 16; d; d >>= 1) {
    l += __shfl_xor_sync(0xffffffffu, l, d);
    w += __shfl_xor_sync(0xffffffffu, w, d);
  }
  if (threadIdx.x % 32 == 0) { sl[threadIdx.x / 32] = l; sw[threadIdx.x / 32] = w; }
  __syncthreads();
  l = threadIdx.x < SC_LOSS_BLOCK / 32 ? sl[threadIdx.x] : 0.0;
  w = threadIdx.x < SC_LOSS_BLOCK / 32 ? sw[threadIdx.x] : 0.0;
  for (int d = 16; d; d >>= 1) {
    l += __shfl_xor_sync(0xffffffffu, l, d);
    w += __shfl_xor_sync(0xffffffffu, w, d);
  }
}

// Unreduced: the terms; total_weight (nll) is 0, as ATen leaves it.
template <class F, class TO, class TW>
__global__ void __launch_bounds__(SC_LOSS_BLOCK) sc_loss_none(F f, int64_t n, TO* out, TW* wout) {
  if (wout && blockIdx.x == 0 && threadIdx.x == 0) *wout = sc_from_f<TW>(0.0f);
  for (int64_t i = (int64_t)blockIdx.x * SC_LOSS_BLOCK + threadIdx.x; i < n; i += (int64_t)gridDim.x * SC_LOSS_BLOCK) {
    float l, w;
    f(i, l, w);
    out[i] = sc_from_f<TO>(l);
  }
}

// part[2b], part[2b + 1]: block b's loss and weight sums.
template <class F>
__global__ void __launch_bounds__(SC_LOSS_BLOCK) sc_loss_partial(F f, int64_t n, double* part) {
  double l = 0.0, w = 0.0;
  for (int64_t i = (int64_t)blockIdx.x * SC_LOSS_BLOCK + threadIdx.x; i < n; i += (int64_t)gridDim.x * SC_LOSS_BLOCK) {
    float a, b;
    f(i, a, b);
    l += a;
    w += b;
  }
  sc_loss_block_sum(l, w);
  if (threadIdx.x == 0) { part[2 * blockIdx.x] = l; part[2 * blockIdx.x + 1] = w; }
}

// div > 0: the mean over div elements; div == 0: the sum; div < 0: loss / weight (nll's mean).
SC_INLINE float sc_loss_value(double l, double w, float div) {
  return float(div > 0.0f ? l / div : div < 0.0f ? l / w : l);
}

template <class TO, class TW>
__global__ void __launch_bounds__(SC_LOSS_BLOCK) sc_loss_final(const double* part, int64_t parts, float div, TO* out,
                                                               TW* wout) {
  double l = 0.0, w = 0.0;
  for (int64_t p = threadIdx.x; p < parts; p += SC_LOSS_BLOCK) { l += part[2 * p]; w += part[2 * p + 1]; }
  sc_loss_block_sum(l, w);
  if (threadIdx.x == 0) {
    if (out) *out = sc_from_f<TO>(sc_loss_value(l, w, div));
    if (wout) *wout = sc_from_f<TW>(float(w));
  }
}

template <class F, class TO, class TW>
static void sc_loss_host(F f, int64_t n, int reduce, float div, TO* out, TW* wout) {
  double l = 0.0, w = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float a, b;
    f(i, a, b);
    if (!reduce) { out[i] = sc_from_f<TO>(a); continue; }
    l += a;
    w += b;
  }
  if (!reduce) {
    if (wout) *wout = sc_from_f<TW>(0.0f);
    return;
  }
  if (out) *out = sc_from_f<TO>(sc_loss_value(l, w, div));
  if (wout) *wout = sc_from_f<TW>(float(w));
}
#endif  // SC_LOSS_H
