//! An implicit-GEMM convolution on TF32 tensor cores (mma.sync m16n8k8) with the pointwise epilogue
//! applied in registers and the result written channels-last, once (emit_igemm.py fills in each
//! convolution's geometry). Why: cuDNN's fp32 convolutions of NCHW inputs read a channels-last copy
//! of the input, and the epilogue after them reads the result back: on level 2's transposed
//! convolutions that is a 0.3 ms copy, a 1.2 ms convolution and a 1.0 ms epilogue for 2.7 GB of
//! necessary traffic. This kernel reads the NCHW (or channels-last) input where it lies and writes
//! each output element once. It is one contender of the convolution launcher's first-call choice
//! (conv.cuh): run on the caller's buffers, checked against cuDNN's result, timed against cuDNN's
//! path with its copies, and kept only where it agrees and is faster.
//!
//! The GEMM: rows are output pixels, columns output channels, the reduction (tap, input channel)
//! pairs, channel fastest. A transposed convolution is split into stride-phases (output positions
//! with the same remainders modulo the stride): within a phase every output pixel reads the same
//! taps, and the input position is the phase-local output index plus a per-tap offset, so no
//! multiply-adds are spent on taps that do not contribute. A forward convolution is one phase whose
//! input position is the output index times the stride plus the tap's offset.
#ifndef SC_IGEMM_H
#define SC_IGEMM_H

// One stride-phase: where its outputs start and step, how many there are per dim, and its taps
// (a run of the geometry's tap table).
struct sc_ig_phase {
  int od0, oh0, ow0;  // the phase's first output position
  int pd, ph, pw;     // its outputs per dim
  int taps, first;    // its taps: tap table entries first .. first + taps - 1
  int kpad;           // taps x channels, rounded up to the k-tile
};

// TF32 rounding, 3xTF32's head and tail, cp.async and the m16n8k8 product: tensor_core.cuh
// (emit_igemm.family inlines it first).

// The weight packed per phase as the kernel's B operand: [phase][kpad][npad], rounded to TF32 once
// (kept fp32 under 3xTF32),
// zero past the phase's taps and past the output channels (so the kernel's B loads need no bounds).
// w is [K][C][taps] (forward) or [C][K][taps] (transposed), PyTorch's layouts.
template <class G>
__global__ void sc_ig_pack(const float* __restrict__ w, float* __restrict__ wp) {
  const int64_t total = (int64_t)G::PHASES * G::KPAD * G::NPAD;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int n = (int)(i % G::NPAD);
    const int64_t r = i / G::NPAD;
    const int kk = (int)(r % G::KPAD), p = (int)(r / G::KPAD);
    const sc_ig_phase ph = G::phase(p);
    const int t = kk / G::CP, c = kk - t * G::CP;
    float v = 0.0f;
    if (t < ph.taps && c < G::C && n < G::K) {
      const int wt = G::tap(ph.first + t).w;
      v = G::TRANSPOSED ? w[((int64_t)c * G::K + n) * G::TAPS + wt] : w[((int64_t)n * G::C + c) * G::TAPS + wt];
    }
    wp[i] = G::SPLIT3 ? v : __uint_as_float(sc_tc_tf32(v));  // (3xTF32 splits it in the kernel)
  }
}

__device__ __forceinline__ void sc_ig_cp4(float* dst, const float* src, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
#endif
}

// A block computes BM output pixels of one phase by BN output channels; its warps 32x32 each (two
// m16 by four n8 tiles). K-tiles of SC_IG_BK reduction steps stream through SC_IG_STAGES shared
// buffers by cp.async: A gathered one 4-byte element at a time (zero-filled outside the input), B
// (the packed weight) in 16-byte pieces.
constexpr int SC_IG_BK = 16, SC_IG_STAGES = 3;

// The input at channel c through tap t of the phase, for the pixel whose input origin is (bd, bh,
// bw): its address, or null where the tap falls outside the input (the padding) or past the phase's
// taps (k-tiles round the reduction up).
template <class G>
__device__ __forceinline__ const float* sc_ig_at(const float* xn, const sc_ig_phase& ph, int t, int c, int bd, int bh, int bw) {
  if (t >= ph.taps) return nullptr;
  const int4 tp = G::tap(ph.first + t);
  const int id = bd + tp.x, ih = bh + tp.y, iw = bw + tp.z;
  if ((unsigned)id >= (unsigned)G::ID || (unsigned)ih >= (unsigned)G::IH || (unsigned)iw >= (unsigned)G::IW) return nullptr;
  return xn + ((int64_t)c * G::XS_C + (int64_t)id * G::XS_D + (int64_t)ih * G::XS_H + (int64_t)iw * G::XS_W);
}

// A phase-local output index (< 2^31, emit_igemm checks) as sample and per-dim indices: by constants
// where every phase has the same counts (forward convolutions; transposed ones whose output sizes
// the stride divides), which the compiler turns into multiplies, else by the phase's counts.
template <class G>
__device__ __forceinline__ void sc_ig_split(unsigned m, const sc_ig_phase& ph, int& n, int& jd, int& jh, int& jw) {
  if constexpr (G::UNIFORM) {
    jw = (int)(m % (unsigned)G::PW), m /= (unsigned)G::PW;
    jh = (int)(m % (unsigned)G::PH), m /= (unsigned)G::PH;
    jd = (int)(m % (unsigned)G::PD), n = (int)(m / (unsigned)G::PD);
  } else {
    jw = (int)(m % (unsigned)ph.pw), m /= (unsigned)ph.pw;
    jh = (int)(m % (unsigned)ph.ph), m /= (unsigned)ph.ph;
    jd = (int)(m % (unsigned)ph.pd), n = (int)(m / (unsigned)ph.pd);
  }
}

// WM x WN: a warp's outputs (m16 by n8 tiles, MI by NI of them). 32 x 32 with three stages is the
// kernel measured on the H200; 64 x 32 warps over 128 x 128 or 256 x 64 blocks in two stages (the
// "wide" tiles, STITCHCUDA_CONV_IGEMM_WIDE=1) read the weight half as often per output.
template <class G, int BM, int BN, class Ep, int WM = 32, int WN = 32, int STAGES = SC_IG_STAGES>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32) sc_igemm_conv(const float* __restrict__ x, const float* __restrict__ wp,
                                                                           float* __restrict__ y, Ep ep) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BK = SC_IG_BK, NT = (BM / WM) * (BN / WN) * 32, AROWS = NT / BM, MI = WM / 16, NI = WN / 8;
  static_assert(NT % BM == 0 && BK % AROWS == 0 && BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0 && STAGES >= 2,
                "tile shape");
  // Rows padded by 8 floats: a fragment's 32 loads (4 rows by 8 columns) fall in 32 distinct banks.
  __shared__ __align__(16) float As[STAGES][BK][BM + 8];
  __shared__ __align__(16) float Bs[STAGES][BK][BN + 8];
  __shared__ int64_t s_out[BM];  // each tile row's channels-last output offset, -1 past the phase's end
  const int p = blockIdx.z;
  const sc_ig_phase ph = G::phase(p);
  const int M = (int)G::BATCH * ph.pd * ph.ph * ph.pw;
  const int m0 = blockIdx.x * BM;
  if (m0 >= M) return;
  const int n0 = blockIdx.y * BN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int wm = (warp % (BM / WM)) * WM, wn = (warp / (BM / WM)) * WN;

  // The A loader's pixel: one column of the tile for the whole reduction.
  const int am = tid % BM, ar = tid / BM;
  const int mg = m0 + am;
  const bool mvalid = mg < M;
  int nb, jd, jh, jw;
  sc_ig_split<G>(mvalid ? mg : 0, ph, nb, jd, jh, jw);
  if (ar == 0) {
    const int od = jd * G::OS_D + ph.od0, oh = jh * G::OS_H + ph.oh0, ow = jw * G::OS_W + ph.ow0;
    const int64_t pix = ((int64_t)od * G::OH + oh) * G::OW + ow;
    // Channels-last: the pixel's run of K channels; NCHW (Y_NCHW): channel 0's element, the others
    // a plane (OD x OH x OW) apart.
    s_out[am] = !mvalid ? -1 : G::Y_NCHW ? (int64_t)nb * G::K * G::OD * G::OH * G::OW + pix : ((int64_t)nb * G::OD * G::OH * G::OW + pix) * G::K;
  }
  const int bd = jd * G::IS_D, bh = jh * G::IS_H, bw = jw * G::IS_W;
  const float* xn = x + (int64_t)nb * G::XS_N;
  const float* wpp = wp + (int64_t)p * G::KPAD * G::NPAD + n0;
  const int ktiles = ph.kpad / BK;

  auto load = [&](int kt, int stage) {
    const int k0 = kt * BK;
    if constexpr (G::CP % BK == 0) {
      // A k-tile within one tap: one bounds check and one address a tile, then a channel stride apart.
      const int t = k0 / G::CP, c0 = k0 - t * G::CP + ar;
      const float* at = mvalid ? sc_ig_at<G>(xn, ph, t, c0, bd, bh, bw) : nullptr;
      const bool ok = at != nullptr;
      const float* src = ok ? at : x;
#pragma unroll
      for (int j = 0; j < BK / AROWS; ++j) sc_ig_cp4(&As[stage][ar + j * AROWS][am], ok ? src + (int64_t)j * AROWS * G::XS_C : x, ok);
    } else if constexpr (BK % G::CP == 0 && G::CP % AROWS == 0) {
      // A k-tile of BK / CP whole taps: each tap's bounds and address once, its channels a stride
      // apart; the channels CP pads C with read as zeros.
      const int t0 = k0 / G::CP;
#pragma unroll
      for (int u = 0; u < BK / G::CP; ++u) {
        const float* at = mvalid ? sc_ig_at<G>(xn, ph, t0 + u, ar, bd, bh, bw) : nullptr;
        const bool ok = at != nullptr;
        const float* src = ok ? at : x;
#pragma unroll
        for (int j = u * G::CP / AROWS; j < (u + 1) * G::CP / AROWS; ++j) {
          const int dc = j * AROWS - u * G::CP;  // the channel, less ar
          const bool in = ok && ar + dc < G::C;
          sc_ig_cp4(&As[stage][ar + j * AROWS][am], in ? src + (int64_t)dc * G::XS_C : x, in);
        }
      }
    } else {
#pragma unroll
    for (int j = 0; j < BK / AROWS; ++j) {
      const int r = ar + j * AROWS;
      const int kk = k0 + r;
      const int t = kk / G::CP, c = kk - t * G::CP;
      const float* at = mvalid && c < G::C ? sc_ig_at<G>(xn, ph, t, c, bd, bh, bw) : nullptr;
      sc_ig_cp4(&As[stage][r][am], at ? at : x, at != nullptr);
    }
    }
    constexpr int CHUNKS = BK * BN / 4;
#pragma unroll
    for (int i = tid; i < CHUNKS; i += NT) {
      const int r = i / (BN / 4), cc = (i % (BN / 4)) * 4;
      sc_tc_cp16(&Bs[stage][r][cc], wpp + (int64_t)(k0 + r) * G::NPAD + cc, true);
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load(s, s);
    sc_tc_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    sc_tc_wait<STAGES - 2>();
    __syncthreads();  // tile kt is in; every warp is done with the buffer the next load overwrites
    if (kt + STAGES - 1 < ktiles) load(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
    sc_tc_commit();
    const int st = kt % STAGES;
#pragma unroll
    for (int ks = 0; ks < BK; ks += 8) {
      float af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int mb = wm + mi * 16 + gid;
        af[mi][0] = As[st][ks + tig][mb];
        af[mi][1] = As[st][ks + tig][mb + 8];
        af[mi][2] = As[st][ks + tig + 4][mb];
        af[mi][3] = As[st][ks + tig + 4][mb + 8];
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int nc = wn + ni * 8 + gid;
        bf[ni][0] = Bs[st][ks + tig][nc];
        bf[ni][1] = Bs[st][ks + tig + 4][nc];
      }
      uint32_t a[MI][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int q = 0; q < 4; ++q) a[mi][q] = G::SPLIT3 ? sc_tc_head(af[mi][q]) : sc_tc_tf32(af[mi][q]);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int q = 0; q < 2; ++q) b[ni][q] = G::SPLIT3 ? sc_tc_head(bf[ni][q]) : __float_as_uint(bf[ni][q]);
      if constexpr (G::SPLIT3) {
        // 3xTF32: each operand as a TF32 head plus the TF32 of what the head leaves (exact in fp32);
        // the small products first, then the heads' (the tail x tail product is below fp32's ulp).
        uint32_t at[MI][4], bt[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int q = 0; q < 4; ++q) at[mi][q] = sc_tc_tail(af[mi][q], a[mi][q]);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int q = 0; q < 2; ++q) bt[ni][q] = sc_tc_tail(bf[ni][q], b[ni][q]);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            sc_tc_mma_tf32(acc[mi][ni], at[mi], b[ni]);
            sc_tc_mma_tf32(acc[mi][ni], a[mi], bt[ni]);
          }
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) sc_tc_mma_tf32(acc[mi][ni], a[mi], b[ni]);
    }
  }
  sc_tc_wait<0>();
  __syncthreads();  // s_out is written (also where the reduction is empty)

  // The epilogue, element by element at its channels-last index; a thread's pairs of neighbouring
  // channels are stored together where the channel count keeps them 8-byte aligned.
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t base = s_out[wm + mi * 16 + gid + half * 8];
      if (base < 0) continue;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int k = n0 + wn + ni * 8 + 2 * tig;
        const float* v = &acc[mi][ni][half * 2];
        if constexpr (G::Y_NCHW) {
          constexpr int64_t plane = (int64_t)G::OD * G::OH * G::OW;
          if (k < G::K) y[base + k * plane] = ep(base + k * plane, v[0]);
          if (k + 1 < G::K) y[base + (k + 1) * plane] = ep(base + (k + 1) * plane, v[1]);
        } else if (G::K % 2 == 0 && k < G::K) {
          *reinterpret_cast<float2*>(y + base + k) = make_float2(ep(base + k, v[0]), ep(base + k + 1, v[1]));
        } else {
          if (k < G::K) y[base + k] = ep(base + k, v[0]);
          if (k + 1 < G::K) y[base + k + 1] = ep(base + k + 1, v[1]);
        }
      }
    }
#elif defined(__CUDA_ARCH__)
  __trap();  // the host offers this kernel only on sm_80 and newer
#endif
}

// The identity epilogue (a convolution whose result is stored as it is).
struct sc_ig_identity {
  SC_INLINE float operator()(int64_t, float v) const { return v; }
};

#endif  // SC_IGEMM_H
