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
};
template <>
struct sc_dwn_vec<1> {
  static __device__ __forceinline__ void load(const float* p, float* v) { v[0] = __ldg(p); }
  static __device__ __forceinline__ void store(float* p, const float* v) { *p = v[0]; }
};

// A block: a warp's width of channels (32 x VEC) for 8 output runs of PX, one a warp, then the next
// 8 runs (grid-stride over x; blockIdx.y picks the channels). Its channels' weights are laid out
// tap-major in shared memory once, then held in registers: read as PyTorch stores them, [C, 1, KH,
// KW], a warp's scalar loads of one tap spread over KH*KW*128*4 bytes, and at 1.2 TB/s the first
// version of this kernel (4 such loads a tap and thread) was bound by them (PVTv2's 8x1024x56x56:
// 173 us on the H200, 9914c1f). Tap-major, a tap's VEC weights are one conflict-free shared load.
template <int VEC, int PX, int KH, int KW, class EP>
__global__ void __launch_bounds__(256) sc_dwn_kernel(const sc_dwn_spec s, const float* __restrict__ x,
                                                     const float* __restrict__ wt, const float* __restrict__ bias,
                                                     float* __restrict__ y, const EP ep) {
  constexpr int TC = 32 * VEC, TAPS = KH * KW;
  __shared__ float wsm[TAPS][TC];
  const long long c0 = (long long)blockIdx.y * TC;
  for (int i = threadIdx.x; i < TAPS * TC; i += blockDim.x) {
    const int t = i / TC, cc = i - t * TC;
    wsm[t][cc] = c0 + cc < s.c ? __ldg(wt + (c0 + cc) * TAPS + t) : 0.f;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long c = c0 + lane * VEC;
  if (c >= s.c) return;
  float b0[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) b0[j] = bias ? __ldg(bias + c + j) : 0.f;
  const long long blocks = (s.ow + PX - 1) / PX, items = s.n * s.oh * blocks;
  for (long long item = (long long)blockIdx.x * 8 + warp; item < items; item += (long long)gridDim.x * 8) {
    const long long ob = item % blocks, r = item / blocks;
    const long long oh = r % s.oh, n = r / s.oh;
    const long long ow0 = ob * PX;
    float acc[PX][VEC];
#pragma unroll
    for (int q = 0; q < PX; ++q)
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[q][j] = b0[j];
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
      const long long ih = oh * s.sh - s.ph + (long long)kh * s.dh;
      if (ih < 0 || ih >= s.h) continue;
      const float* row = x + ((n * s.h + ih) * s.w) * s.c + c;
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        // (From shared memory each tap: in registers a 7x7 filter's 196 floats would spill.)
        float wv[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) wv[j] = wsm[kh * KW + kw][lane * VEC + j];
#pragma unroll
        for (int q = 0; q < PX; ++q) {
          const long long iw = (ow0 + q) * s.sw - s.pw + (long long)kw * s.dw;
          if (ow0 + q >= s.ow || iw < 0 || iw >= s.w) continue;
          float xv[VEC];
          sc_dwn_vec<VEC>::load(row + iw * s.c, xv);
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[q][j] = fmaf(xv[j], wv[j], acc[q][j]);
        }
      }
    }
#pragma unroll
    for (int q = 0; q < PX; ++q) {
      if (ow0 + q >= s.ow) continue;
      const long long e = ((n * s.oh + oh) * s.ow + ow0 + q) * s.c + c;
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[q][j] = ep(e + j, acc[q][j]);
      sc_dwn_vec<VEC>::store(y + e, acc[q]);
    }
  }
}

// 4 outputs a thread along a row: each tap's VEC weights serve four outputs.
static constexpr int SC_DWN_PX = 4;

template <int KH, int KW, class EP>
static int sc_dwn_run(const sc_dwn_spec& s, const void* x, const void* w, const void* b, void* y, cudaStream_t stream,
                      const EP& ep) {
  const auto xs = static_cast<const float*>(x);
  const auto ws = static_cast<const float*>(w);
  const auto bs = static_cast<const float*>(b);
  const auto ys = static_cast<float*>(y);
  const long long items = s.n * s.oh * ((s.ow + SC_DWN_PX - 1) / SC_DWN_PX);
  const long long runs = (items + 7) / 8;
  const unsigned gx = (unsigned)(runs < (1LL << 20) ? runs : (1LL << 20));
  // float4 where every pixel's channels start 16-byte aligned (C a multiple of 4, pointers aligned).
  const bool vec4 = s.c % 4 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  if (vec4) {
    const dim3 grid(gx, (unsigned)((s.c + 127) / 128));
    sc_dwn_kernel<4, SC_DWN_PX, KH, KW, EP><<<grid, 256, 0, stream>>>(s, xs, ws, bs, ys, ep);
  } else {
    const dim3 grid(gx, (unsigned)((s.c + 31) / 32));
    sc_dwn_kernel<1, SC_DWN_PX, KH, KW, EP><<<grid, 256, 0, stream>>>(s, xs, ws, bs, ys, ep);
  }
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
