//! A depthwise 2-D convolution (one filter a channel) over channels-last storage, N, H, W, C in and
//! out: what a vision transformer's tokens are when they reach a depthwise convolution as a permuted
//! view (PVTv2's and SegFormer's Mix-FFN). cuDNN's NHWC kernel for it (conv2d_grouped_direct) took
//! 229 us on PVTv2's 8x1024x56x56 on the H200 where the NCHW direct kernel took 86 plus two
//! transposing copies of 186 us; the channels are the fastest dimension of both tensors, so a warp's
//! VEC channels a thread make contiguous loads and stores, and the other taps of a pixel's
//! neighbours are L1/L2 hits.
//! A thread: VEC adjacent channels of PX outputs along a row, so each tap's weights are loaded once
//! for PX outputs. Weights are PyTorch's [C, 1, KH, KW]. EP: the planner's pointwise chain after the
//! convolution (its call with (e, v) gives the chain's end at storage element e), or sc_dwn_id.
#ifndef SC_DWN_H
#define SC_DWN_H
struct sc_dwn_spec {
  long long n, h, w, c, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
};

struct sc_dwn_id {
  SC_INLINE float operator()(int64_t, float v) const { return v; }
};

template <int VEC>
struct sc_dwn_vec;
template <>
struct sc_dwn_vec<4> {
  static __device__ __forceinline__ void load(const float* p, float* v) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  }
  static __device__ __forceinline__ void store(float* p, const float* v) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
  static __device__ __forceinline__ void load_shared(const float* p, float* v) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  }
};
template <>
struct sc_dwn_vec<1> {
  static __device__ __forceinline__ void load(const float* p, float* v) { v[0] = __ldg(p); }
  static __device__ __forceinline__ void store(float* p, const float* v) { *p = v[0]; }
  static __device__ __forceinline__ void load_shared(const float* p, float* v) { v[0] = *p; }
};

// A block: a warp's width of channels (32 x VEC) for runs of PX outputs, one run a warp at a time,
// grid-stride over the runs (blockIdx.y picks the channels). Its channels' weights are laid out
// tap-major in shared memory once: read as PyTorch stores them, [C, 1, KH, KW], a warp's scalar loads
// of one tap spread over KH*KW*128*4 bytes, and at 1.2 TB/s the first version of this kernel (4 such
// loads a tap and thread) was bound by them (PVTv2's 8x1024x56x56: 173 us on the H200, 9914c1f).
// Tap-major, a tap's VEC weights are one conflict-free shared load. The grid holds what is resident
// (sc_dwn_run), so each block stages its filters once for many runs: one block a run of 8 staged a
// 7x7 filter's 25 KB for 16 KB of output.
// UNIT (a horizontal stride and dilation of 1, the common case): a row's PX + KW - 1 input pixels
// are loaded once into registers and each serves every tap and output that reads it; the general
// path loads PX x KW of them (L1 hits, but 2x the load instructions for a 3x3, and the bound at
// 162 us on PVTv2's 8x1024x56x56, 0c82e74; 87.5 us with the window, bf4e116). Padding is zeros in the
// window, so a non-finite weight meets it (0 x inf: NaN at the border) where the host path skips the
// tap; finite weights give the same bits. I: int where every offset fits, else long long.
template <int VEC, int PX, int KH, int KW, bool UNIT, class I, class EP>
__global__ void __launch_bounds__(256) sc_dwn_kernel(const sc_dwn_spec s, const float* __restrict__ x,
                                                     const float* __restrict__ wt, const float* __restrict__ bias,
                                                     float* __restrict__ y, const EP ep) {
  constexpr int TC = 32 * VEC, TAPS = KH * KW;
  __shared__ __align__(16) float wsm[TAPS][TC];
  const I C = (I)s.c, H = (I)s.h, W = (I)s.w, OH = (I)s.oh, OW = (I)s.ow;
  const I c0 = (I)blockIdx.y * TC;
  for (int i = threadIdx.x; i < TAPS * TC; i += blockDim.x) {
    const int t = i / TC, cc = i - t * TC;
    wsm[t][cc] = c0 + cc < C ? __ldg(wt + ((long long)c0 + cc) * TAPS + t) : 0.f;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const I c = c0 + lane * VEC;
  if (c >= C) return;
  float b0[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) b0[j] = bias ? __ldg(bias + c + j) : 0.f;
  const I blocks = (OW + PX - 1) / PX, items = (I)s.n * OH * blocks;
  for (I item = (I)blockIdx.x * 8 + warp; item < items; item += (I)gridDim.x * 8) {
    const I ob = item % blocks, r = item / blocks;
    const I oh = r % OH, n = r / OH;
    const I ow0 = ob * PX;
    float acc[PX][VEC];
#pragma unroll
    for (int q = 0; q < PX; ++q)
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[q][j] = b0[j];
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
      const I ih = oh * s.sh - s.ph + kh * s.dh;
      if (ih < 0 || ih >= H) continue;
      const float* row = x + ((n * H + ih) * W) * C + c;
      if constexpr (UNIT) {
        constexpr int WIN = PX + KW - 1;
        float xw[WIN][VEC];
        const I iw0 = ow0 - s.pw;
#pragma unroll
        for (int p = 0; p < WIN; ++p) {
          if (iw0 + p >= 0 && iw0 + p < W) {
            sc_dwn_vec<VEC>::load(row + (iw0 + p) * C, xw[p]);
          } else {
#pragma unroll
            for (int j = 0; j < VEC; ++j) xw[p][j] = 0.f;
          }
        }
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          float wv[VEC];
          sc_dwn_vec<VEC>::load_shared(&wsm[kh * KW + kw][lane * VEC], wv);
#pragma unroll
          for (int q = 0; q < PX; ++q)
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[q][j] = fmaf(xw[q + kw][j], wv[j], acc[q][j]);
        }
      } else {
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          // (From shared memory each tap: in registers a 7x7 filter's 196 floats would spill.)
          float wv[VEC];
          sc_dwn_vec<VEC>::load_shared(&wsm[kh * KW + kw][lane * VEC], wv);
#pragma unroll
          for (int q = 0; q < PX; ++q) {
            const I iw = (ow0 + q) * s.sw - s.pw + kw * s.dw;
            if (ow0 + q >= OW || iw < 0 || iw >= W) continue;
            float xv[VEC];
            sc_dwn_vec<VEC>::load(row + iw * C, xv);
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[q][j] = fmaf(xv[j], wv[j], acc[q][j]);
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < PX; ++q) {
      if (ow0 + q >= OW) continue;
      const I e = ((n * OH + oh) * OW + ow0 + q) * C + c;
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[q][j] = ep((int64_t)e + j, acc[q][j]);
      sc_dwn_vec<VEC>::store(y + e, acc[q]);
    }
  }
}

// 4 outputs a thread along a row: each tap's VEC weights serve four outputs.
static constexpr int SC_DWN_PX = 4;

template <int VEC, int KH, int KW, bool UNIT, class I, class EP>
static void sc_dwn_launch(const sc_dwn_spec& s, const float* x, const float* w, const float* b, float* y,
                          cudaStream_t stream, const EP& ep) {
  const auto kernel = sc_dwn_kernel<VEC, SC_DWN_PX, KH, KW, UNIT, I, EP>;
  // What is resident, from the device: the SM count and this kernel's blocks per SM (registers and
  // shared memory decide it); the occupancy is the kernel's, so asked once.
  static int per_sm = 0;
  if (per_sm == 0 && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0) != cudaSuccess ||
                      per_sm < 1)) {
    per_sm = 1;
    (void)cudaGetLastError();  // (a failed query is not the launch's error, which sc_dwn_run returns)
  }
  int dev = 0, sms = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const long long gy = (s.c + 32 * VEC - 1) / (32 * VEC);
  const long long items = s.n * s.oh * ((s.ow + SC_DWN_PX - 1) / SC_DWN_PX);
  const long long runs = (items + 7) / 8;
  const long long resident = ((long long)sms * per_sm + gy - 1) / gy;
  const long long gx = runs < resident ? runs : resident;
  kernel<<<dim3((unsigned)(gx < 1 ? 1 : gx), (unsigned)gy), 256, 0, stream>>>(s, x, w, b, y, ep);
}

// UNIT and I from the emitter, which knows the shape (the spec is a constant): one kernel for each
// of the two widths, not eight to build.
template <int KH, int KW, bool UNIT, class I, class EP>
static int sc_dwn_run(const sc_dwn_spec& s, const void* x, const void* w, const void* b, void* y, cudaStream_t stream,
                      const EP& ep) {
  const auto xs = static_cast<const float*>(x);
  const auto ws = static_cast<const float*>(w);
  const auto bs = static_cast<const float*>(b);
  const auto ys = static_cast<float*>(y);
  // float4 where every pixel's channels start 16-byte aligned (C a multiple of 4, pointers aligned).
  const bool vec4 = s.c % 4 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  if (vec4) sc_dwn_launch<4, KH, KW, UNIT, I>(s, xs, ws, bs, ys, stream, ep);
  else sc_dwn_launch<1, KH, KW, UNIT, I>(s, xs, ws, bs, ys, stream, ep);
  return (int)cudaGetLastError();
}

// The same sums on the CPU, in the kernel's order (bias first, then taps row by row), for the
// candidate's host entry.
template <class EP>
static void sc_dwn_host(const sc_dwn_spec& s, const void* x, const void* w, const void* b, void* y, const EP& ep) {
  const auto xs = static_cast<const float*>(x);
  const auto ws = static_cast<const float*>(w);
  const auto bs = static_cast<const float*>(b);
  const auto ys = static_cast<float*>(y);
  for (long long n = 0; n < s.n; ++n)
    for (long long oh = 0; oh < s.oh; ++oh)
      for (long long ow = 0; ow < s.ow; ++ow)
        for (long long c = 0; c < s.c; ++c) {
          float acc = bs ? bs[c] : 0.f;
          for (int kh = 0; kh < s.kh; ++kh) {
            const long long ih = oh * s.sh - s.ph + (long long)kh * s.dh;
            if (ih < 0 || ih >= s.h) continue;
            for (int kw = 0; kw < s.kw; ++kw) {
              const long long iw = ow * s.sw - s.pw + (long long)kw * s.dw;
              if (iw < 0 || iw >= s.w) continue;
              acc = fmaf(xs[((n * s.h + ih) * s.w + iw) * s.c + c], ws[c * s.kh * s.kw + kh * s.kw + kw], acc);
            }
          }
          const long long e = ((n * s.oh + oh) * s.ow + ow) * s.c + c;
          ys[e] = ep(e, acc);
        }
}
#endif
