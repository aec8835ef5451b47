//! Shared by every direct dense convolution kernel of a .cu (emit_conv.py's _direct_dense): fp32
//! FMA, NCHW in and out, 2-D or 3-D, for convolutions with few input channels (a network's stem, or
//! level 2's 3- and 8-channel 3-D convolutions on the exact rungs).
//!
//! Why our own: with few input channels a convolution is a short sum per output (27 to a few
//! hundred products), and cuDNN's FMA kernels run such shapes at a fraction of the GPU's fp32 rate
//! (on the H200: level 2's 48, 3 -> 16 channels of 3x3x3, 1.66 ms, about 11 TFLOP/s; 90, 8 -> 64
//! channels, 4.94 ms, 38 TFLOP/s). The exact rungs need fp32's accuracy: a TF32 candidate there has
//! already failed the Verifier's large-input set (its convolution feeds a sigmoid or a clamp).
//!
//! A block stages the input tile its outputs read (all input channels, the depth taps of one output
//! depth; several channel-and-depth slabs at a time) and the weights of M output channels in shared
//! memory; each thread keeps R outputs of a column for M channels in registers and, tap by tap,
//! loads the M weights once (M/4 16-byte loads) and each of its R input values once (R*M FMAs per
//! R+M/4 shared loads).
//! Each output sums its products in the order (input channel, depth tap, row tap, column tap), as a
//! loop over the kernel would. The geometry is compile-time (sc_dc_geom), the padding run-time.

#ifndef SC_DIRECT_CONV_H
#define SC_DIRECT_CONV_H

template <int CI_, int KD_, int KH_, int KW_, int SD_, int SH_, int SW_, int DD_, int DH_, int DW_, int R_, int M_,
          int SLABS_>
struct sc_dc_geom {
  static constexpr int CI = CI_, KD = KD_, KH = KH_, KW = KW_, SD = SD_, SH = SH_, SW = SW_, DD = DD_, DH = DH_,
                       DW = DW_, R = R_, M = M_, SLABS = SLABS_;
  static constexpr int TH = 8 * R, TW = 32;  // a 32 x 8 block's output tile
  static constexpr int IH = (TH - 1) * SH + (KH - 1) * DH + 1, IW = (TW - 1) * SW + (KW - 1) * DW + 1;
  static constexpr int TAPS = KD * KH * KW, SL = CI * KD;  // slabs: (input channel, depth tap)
};

struct sc_dc_spec {
  long long n, c, d, h, w;  // input (d = 1 for 2-D)
  long long oc, od, oh, ow;  // output
  int pd, ph, pw;
};

SC_INLINE float sc_dc_load(const float* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

// The block's (n, output depth, channel chunk) of `plane`.
struct sc_dc_plane {
  long long n, z, c0;
};
template <class G>
SC_INLINE sc_dc_plane sc_dc_plane_of(const sc_dc_spec& s, long long plane) {
  const long long chunks = (s.oc + G::M - 1) / G::M;
  return {plane / (s.od * chunks), (plane / chunks) % s.od, (plane % chunks) * G::M};
}

// The weights of the plane's M output channels (zero past the last), [ci][tap][m]: a tap's M weights
// are adjacent, read as M / 4 16-byte loads.
template <class G>
SC_INLINE void sc_dc_stage_weights(const float* __restrict__ wt, const sc_dc_spec& s, float* wsh, long long c0,
                                   int t, int nt) {
  for (int k = t; k < G::M * G::CI * G::TAPS; k += nt) {
    const long long co = c0 + k % G::M;
    wsh[k] = co < s.oc ? sc_dc_load(wt + co * (G::CI * G::TAPS) + k / G::M) : 0.f;
  }
}

// Slabs first..first+SLABS-1 (input channel s / KD, depth tap s % KD) of the input tile whose first
// element is (iz of depth tap 0, iy0, ix0); zeros outside the input.
template <class G>
SC_INLINE void sc_dc_stage_input(const float* __restrict__ x, const sc_dc_spec& s, float* tile, const sc_dc_plane& p,
                                 int first, long long iy0, long long ix0, int tx, int ty, int nx, int ny) {
  for (int k = 0; k < G::SLABS && first + k < G::SL; ++k) {
    const int sl = first + k, ci = sl / G::KD, kd = sl % G::KD;
    const long long iz = p.z * G::SD - s.pd + kd * G::DD;
    const bool z_in = iz >= 0 && iz < s.d;
    const float* src = x + ((p.n * s.c + ci) * s.d + (z_in ? iz : 0)) * s.h * s.w;
    float* dst = tile + k * (G::IH * G::IW);
    for (int r = ty; r < G::IH; r += ny) {
      const long long gy = iy0 + r;
      const bool row_in = z_in && gy >= 0 && gy < s.h;
      for (int c = tx; c < G::IW; c += nx) {
        const long long gx = ix0 + c;
        dst[r * G::IW + c] = row_in && gx >= 0 && gx < s.w ? sc_dc_load(src + gy * s.w + gx) : 0.f;
      }
    }
  }
}

// Thread (tx, ty)'s R x M partial sums over the staged slabs first..: output rows ty*R.., column tx.
template <class G>
SC_INLINE void sc_dc_accumulate(const float* tile, const float* wsh, int first, int tx, int ty, float (&acc)[G::R][G::M]) {
  for (int k = 0; k < G::SLABS && first + k < G::SL; ++k) {
    const int sl = first + k, ci = sl / G::KD, kd = sl % G::KD;
    const float* base = tile + k * (G::IH * G::IW) + (ty * G::R * G::SH) * G::IW + tx * G::SW;
    const float* wbase = wsh + (ci * G::TAPS + kd * G::KH * G::KW) * G::M;
#pragma unroll
    for (int i = 0; i < G::KH; ++i) {
#pragma unroll
      for (int j = 0; j < G::KW; ++j) {
        const float* wtap = wbase + (i * G::KW + j) * G::M;
        float wv[G::M];
        if constexpr (G::M % 4 == 0) {
#pragma unroll
          for (int m = 0; m < G::M; m += 4) {
            const float4 q = *reinterpret_cast<const float4*>(wtap + m);
            wv[m] = q.x, wv[m + 1] = q.y, wv[m + 2] = q.z, wv[m + 3] = q.w;
          }
        } else {
#pragma unroll
          for (int m = 0; m < G::M; ++m) wv[m] = wtap[m];
        }
#pragma unroll
        for (int o = 0; o < G::R; ++o) {
          const float v = base[(o * G::SH + i * G::DH) * G::IW + j * G::DW];
#pragma unroll
          for (int m = 0; m < G::M; ++m) acc[o][m] = fmaf(v, wv[m], acc[o][m]);
        }
      }
    }
  }
}

template <class G>
SC_INLINE void sc_dc_store(float* __restrict__ y, const float* __restrict__ bias, const sc_dc_spec& s,
                           const sc_dc_plane& p, long long ty0, long long tx0, int tx, int ty,
                           const float (&acc)[G::R][G::M]) {
  const long long ox = tx0 + tx;
  if (ox >= s.ow) return;
#pragma unroll
  for (int m = 0; m < G::M; ++m) {
    const long long co = p.c0 + m;
    if (co >= s.oc) break;
    const float b = bias ? sc_dc_load(bias + co) : 0.f;
    float* dst = y + ((p.n * s.oc + co) * s.od + p.z) * s.oh * s.ow;
#pragma unroll
    for (int o = 0; o < G::R; ++o) {
      const long long oy = ty0 + ty * G::R + o;
      if (oy < s.oh) dst[oy * s.ow + ox] = acc[o][m] + b;
    }
  }
}

#ifdef __CUDACC__
template <class G>
__global__ void __launch_bounds__(256) sc_dc_conv_kernel(const float* __restrict__ x, const float* __restrict__ wt,
                                                         const float* __restrict__ bias, float* __restrict__ y,
                                                         sc_dc_spec s, int tiles_w, long long planes) {
  // emit_conv keeps both within the 48 KB of static shared memory every device gives a block.
  __shared__ float tile[G::SLABS * G::IH * G::IW];
  __shared__ __align__(16) float wsh[G::M * G::CI * G::TAPS];
  const long long ty0 = (long long)(blockIdx.x / tiles_w) * G::TH, tx0 = (long long)(blockIdx.x % tiles_w) * G::TW;
  const int t = threadIdx.y * 32 + threadIdx.x;
  for (long long plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const sc_dc_plane p = sc_dc_plane_of<G>(s, plane);
    float acc[G::R][G::M];
#pragma unroll
    for (int o = 0; o < G::R; ++o)
#pragma unroll
      for (int m = 0; m < G::M; ++m) acc[o][m] = 0.f;
    __syncthreads();  // the previous plane's weights and tile are no longer read
    sc_dc_stage_weights<G>(wt, s, wsh, p.c0, t, 256);
    for (int first = 0; first < G::SL; first += G::SLABS) {
      if (first) __syncthreads();  // the previous slabs are no longer read
      sc_dc_stage_input<G>(x, s, tile, p, first, ty0 * G::SH - s.ph, tx0 * G::SW - s.pw, threadIdx.x, threadIdx.y, 32, 8);
      __syncthreads();
      sc_dc_accumulate<G>(tile, wsh, first, threadIdx.x, threadIdx.y, acc);
    }
    sc_dc_store<G>(y, bias, s, p, ty0, tx0, threadIdx.x, threadIdx.y, acc);
  }
}

template <class G>
static int sc_dc_conv_run(const sc_dc_spec& s, const void* x, const void* w, const void* bias, void* y,
                          cudaStream_t stream) {
  const long long tiles_w = (s.ow + G::TW - 1) / G::TW, tiles_h = (s.oh + G::TH - 1) / G::TH;
  const long long planes = s.n * s.od * ((s.oc + G::M - 1) / G::M);
  const dim3 grid((unsigned)(tiles_w * tiles_h), (unsigned)(planes < 65535 ? planes : 65535));
  sc_dc_conv_kernel<G><<<grid, dim3(32, 8), 0, stream>>>(static_cast<const float*>(x), static_cast<const float*>(w),
                                                         static_cast<const float*>(bias), static_cast<float*>(y), s,
                                                         (int)tiles_w, planes);
  return (int)cudaGetLastError();
}
#endif

// The CPU entry: every block's phases in turn, its threads one after another (the tests' view of
// the GPU's index math).
template <class G>
static void sc_dc_conv_host(const sc_dc_spec& s, const void* x, const void* w, const void* bias, void* y) {
  const long long tiles_w = (s.ow + G::TW - 1) / G::TW, tiles_h = (s.oh + G::TH - 1) / G::TH;
  const long long planes = s.n * s.od * ((s.oc + G::M - 1) / G::M);
  float* tile = new float[G::SLABS * G::IH * G::IW];
  float4* wsh4 = new float4[(G::M * G::CI * G::TAPS + 3) / 4];  // 16-byte aligned, as the float4 reads need
  float* wsh = reinterpret_cast<float*>(wsh4);
  float(*acc)[G::R][G::M] = new float[256][G::R][G::M];
  for (long long block = 0; block < tiles_w * tiles_h; ++block) {
    const long long ty0 = block / tiles_w * G::TH, tx0 = block % tiles_w * G::TW;
    for (long long plane = 0; plane < planes; ++plane) {
      const sc_dc_plane p = sc_dc_plane_of<G>(s, plane);
      for (int t = 0; t < 256; ++t)
        for (int o = 0; o < G::R; ++o)
          for (int m = 0; m < G::M; ++m) acc[t][o][m] = 0.f;
      sc_dc_stage_weights<G>(static_cast<const float*>(w), s, wsh, p.c0, 0, 1);
      for (int first = 0; first < G::SL; first += G::SLABS) {
        sc_dc_stage_input<G>(static_cast<const float*>(x), s, tile, p, first, ty0 * G::SH - s.ph, tx0 * G::SW - s.pw,
                             0, 0, 1, 1);
        for (int t = 0; t < 256; ++t) sc_dc_accumulate<G>(tile, wsh, first, t % 32, t / 32, acc[t]);
      }
      for (int t = 0; t < 256; ++t)
        sc_dc_store<G>(static_cast<float*>(y), static_cast<const float*>(bias), s, p, ty0, tx0, t % 32, t / 32, acc[t]);
    }
  }
  delete[] acc;
  delete[] wsh4;
  delete[] tile;
}
#endif
