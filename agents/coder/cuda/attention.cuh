//! Fused attention (emit_attention.py): softmax(f(Q Kᵀ)) V in one kernel, flash-style. f is the
//! chain the Planner folded into the node (scale, additive or boolean masks, causal), given per
//! kernel by a traits struct `Tr` (shapes, strides, tile sizes, `Tr::score`); this block is the
//! fixed machinery every attention kernel of a .cu shares.
//!
//! One block per (batch·head, tile of BR query rows), BR / 16 warps, each warp owning 16 rows of
//! every tile it touches (so the softmax needs no block-wide sync). For each tile of BC keys: K and
//! V into shared memory, S = Q Kᵀ (tensor cores: fp16/bf16 m16n16k16, fp32 as TF32 m16n16k8; or
//! fp32 FMA when Tr::TC is false), the online softmax (running max m and sum l per row; the output
//! rows are rescaled by exp(m_old - m_new)), then O += P V. With masks, a key tile that they mask
//! entirely for the block's rows is skipped (probed per tile, so a causal buffer costs half). S and O stay in shared memory as fp32:
//! WMMA's accumulator layout is opaque, and a row-wise rescale needs to know which row an element
//! is in. Causal chains stop at the last key tile a row of the block can see.
#ifndef SC_ATTENTION_H
#define SC_ATTENTION_H
#include <mma.h>

namespace sc_attn {
namespace wmma = nvcuda::wmma;

// Tensor-core fragments per element type: K is the depth of one mma step.
template <class T> struct Mma;
template <> struct Mma<__half> {
  static constexpr int K = 16;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>;
  using BCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>;
  using BRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  template <class F> __device__ static void round(F&) {}
};
template <> struct Mma<__nv_bfloat16> {
  static constexpr int K = 16;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
  using BCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
  using BRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  template <class F> __device__ static void round(F&) {}
};
template <> struct Mma<float> {  // TF32: fp32 storage, operands rounded to TF32 as they are loaded
  static constexpr int K = 8;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
  using BCol = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
  using BRow = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
  template <class F> __device__ static void round(F& f) {
#pragma unroll
    for (int t = 0; t < f.num_elements; ++t) f.x[t] = wmma::__float_to_tf32(f.x[t]);
  }
};

SC_INLINE constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Shared-memory layout of one block (elements per row, with padding, and byte offsets). Tensor
// cores need rows of a multiple of 16 bytes and fragments on 32-byte boundaries; the FMA path pads
// by one element so that lanes reading a column of K hit distinct banks.
template <class T, int BR, int BC, int DP, int DVP, bool TC>
struct Smem {
  static constexpr int PADT = TC ? 16 / (int)sizeof(T) : 1;
  static constexpr int PADF = TC ? 4 : 1;
  static constexpr int LQ = DP + PADT, LK = DP + PADT, LV = DVP + PADT;
  static constexpr int LS = BC + PADF, LP = BC + PADT, LO = DVP + PADF;
  static constexpr int Q = 0;
  static constexpr int K = Q + round_up(BR * LQ * (int)sizeof(T), 128);
  static constexpr int V = K + round_up(BC * LK * (int)sizeof(T), 128);
  static constexpr int S = V + round_up(BC * LV * (int)sizeof(T), 128);
  static constexpr int P = S + round_up(BR * LS * 4, 128);
  static constexpr int O = P + round_up(BR * LP * (int)sizeof(T), 128);
  static constexpr int M = O + round_up(BR * LO * 4, 128);
  static constexpr int L = M + round_up(BR * 4, 128);
  static constexpr int BYTES = L + round_up(BR * 4, 128);
};

// rows x cols of a [rows, D] matrix (element (r, c) at src[r * sr + c * sc]) into shared memory
// with row length `ld`; rows past `valid` and columns past `cols` are zeros (padding must be
// finite: a zero P times a NaN V would still be NaN). VEC: 16-byte loads, when sc == 1 and every
// row start is aligned (checked by the launcher).
template <class T, int NT, int ROWS, int COLS, int CP, int64_t SR, int64_t SC_, int VEC>
__device__ __forceinline__ void load_tile(T* dst, int ld, const T* src, int valid) {
  if constexpr (VEC > 1) {
    constexpr int CV = CP / VEC;
    for (int e = threadIdx.x; e < ROWS * CV; e += NT) {
      const int r = e / CV, c = (e % CV) * VEC;
      sc_vec<T, VEC> v;
      if (r < valid && c < COLS) {
        v = sc_load<VEC>(src + (int64_t)r * SR + c);
      } else {
#pragma unroll
        for (int t = 0; t < VEC; ++t) v.v[t] = sc_from_f<T>(0.0f);
      }
#pragma unroll
      for (int t = 0; t < VEC; ++t) dst[r * ld + c + t] = v.v[t];
    }
  } else {
    for (int e = threadIdx.x; e < ROWS * CP; e += NT) {
      const int r = e / CP, c = e % CP;
      dst[r * ld + c] = (r < valid && c < COLS) ? src[(int64_t)r * SR + (int64_t)c * SC_] : sc_from_f<T>(0.0f);
    }
  }
}

template <class Tr, int VEC>
__global__ void __launch_bounds__(Tr::BR / 16 * 32) kernel(typename Tr::Args a) {
  using T = typename Tr::T;
  using TO = typename Tr::TO;
  constexpr int BR = Tr::BR, BC = Tr::BC, D = Tr::D, DV = Tr::DV;
  constexpr int DP = round_up(D, 32), DVP = round_up(DV, 32);
  constexpr int NT = BR / 16 * 32;
  using L = Smem<T, BR, BC, DP, DVP, Tr::TC>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + L::Q);
  T* sK = reinterpret_cast<T*>(smem + L::K);
  T* sV = reinterpret_cast<T*>(smem + L::V);
  float* sS = reinterpret_cast<float*>(smem + L::S);
  T* sP = reinterpret_cast<T*>(smem + L::P);
  float* sO = reinterpret_cast<float*>(smem + L::O);
  float* sM = reinterpret_cast<float*>(smem + L::M);
  float* sL = reinterpret_cast<float*>(smem + L::L);

  constexpr int TILES = (Tr::SQ + BR - 1) / BR;
  const int64_t bh = (int64_t)blockIdx.x / TILES;
  // Causal blocks of late query tiles have the most key tiles: they are scheduled first.
  const int qt = Tr::CAUSAL ? TILES - 1 - (int)(blockIdx.x % TILES) : (int)(blockIdx.x % TILES);
  const int i0 = qt * BR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  load_tile<T, NT, BR, D, DP, Tr::QSR, Tr::QSD, VEC>(sQ, L::LQ, a.q + Tr::q_base(bh) + (int64_t)i0 * Tr::QSR,
                                                      Tr::SQ - i0);
  for (int e = threadIdx.x; e < BR * L::LO; e += NT) sO[e] = 0.0f;
  for (int r = threadIdx.x; r < BR; r += NT) {
    sM[r] = -INFINITY;
    sL[r] = 0.0f;
  }

  int tiles = (Tr::SK + BC - 1) / BC;
  if (Tr::CAUSAL) {  // keys past the last row's diagonal are masked for every row of the block
    const int64_t last = (int64_t)i0 + BR - 1 + Tr::DIAG;
    const int64_t seen = last < 0 ? 0 : last / BC + 1;
    tiles = seen < tiles ? (int)seen : tiles;
  }
  const T* kb = a.k + Tr::k_base(bh);
  const T* vb = a.v + Tr::v_base(bh);
  for (int kt = 0; kt < tiles; ++kt) {
    const int j0 = kt * BC;
    if constexpr (Tr::MASK_SKIP) {
      // A tile whose every score the masks set to -inf (a causal buffer's upper triangle) adds
      // nothing: probed with a zero score, so only the masks decide. The barrier also keeps the
      // previous tile's K and V until every warp is done with them.
      bool live = false;
      for (int e = threadIdx.x; e < BR * BC && !live; e += NT) {
        const int i = i0 + e / BC, j = j0 + e % BC;
        live = i < Tr::SQ && j < Tr::SK && Tr::score(a, bh, i, j, 0.0f) != -INFINITY;
      }
      if (!__syncthreads_or(live)) continue;
    }
    __syncthreads();  // the previous tile's K and V are no longer read
    load_tile<T, NT, BC, D, DP, Tr::KSR, Tr::KSD, VEC>(sK, L::LK, kb + (int64_t)j0 * Tr::KSR, Tr::SK - j0);
    load_tile<T, NT, BC, DV, DVP, Tr::VSR, Tr::VSD, VEC>(sV, L::LV, vb + (int64_t)j0 * Tr::VSR, Tr::SK - j0);
    __syncthreads();

    // S = Q Kᵀ for this warp's 16 rows.
    if constexpr (Tr::TC) {
      using F = Mma<T>;
      typename F::Acc acc[BC / 16];
#pragma unroll
      for (int n = 0; n < BC / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
      for (int kk = 0; kk < DP; kk += F::K) {
        typename F::A fa;
        wmma::load_matrix_sync(fa, sQ + warp * 16 * L::LQ + kk, L::LQ);
        F::round(fa);
#pragma unroll
        for (int n = 0; n < BC / 16; ++n) {
          typename F::BCol fb;
          wmma::load_matrix_sync(fb, sK + n * 16 * L::LK + kk, L::LK);
          F::round(fb);
          wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < BC / 16; ++n)
        wmma::store_matrix_sync(sS + warp * 16 * L::LS + n * 16, acc[n], L::LS, wmma::mem_row_major);
    } else {
      float acc[16][BC / 32];
#pragma unroll
      for (int r = 0; r < 16; ++r)
#pragma unroll
        for (int t = 0; t < BC / 32; ++t) acc[r][t] = 0.0f;
      for (int d = 0; d < D; ++d) {
        float kv[BC / 32];
#pragma unroll
        for (int t = 0; t < BC / 32; ++t) kv[t] = sc_to_f(sK[(lane + 32 * t) * L::LK + d]);
#pragma unroll
        for (int r = 0; r < 16; ++r) {
          const float qv = sc_to_f(sQ[(warp * 16 + r) * L::LQ + d]);
#pragma unroll
          for (int t = 0; t < BC / 32; ++t) acc[r][t] = fmaf(qv, kv[t], acc[r][t]);
        }
      }
#pragma unroll
      for (int r = 0; r < 16; ++r)
#pragma unroll
        for (int t = 0; t < BC / 32; ++t) sS[(warp * 16 + r) * L::LS + lane + 32 * t] = acc[r][t];
    }
    __syncwarp();

    // Online softmax over the tile, row by row; out-of-range keys and rows are -inf.
    for (int rr = 0; rr < 16; ++rr) {
      const int r = warp * 16 + rr, i = i0 + r;
      float vals[BC / 32];
      float mx = -INFINITY;
#pragma unroll
      for (int t = 0; t < BC / 32; ++t) {
        const int c = lane + 32 * t, j = j0 + c;
        float s = -INFINITY;
        if (i < Tr::SQ && j < Tr::SK) s = Tr::score(a, bh, i, j, sS[r * L::LS + c]);
        vals[t] = s;
        mx = fmaxf(mx, s);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = sM[r];
      const float m_new = fmaxf(m_old, mx);
      // With no key seen yet (m_old = -inf) O and l are zero and alpha is moot: 0 avoids inf - inf.
      const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int t = 0; t < BC / 32; ++t) {
        const float p = m_new == -INFINITY ? 0.0f : expf(vals[t] - m_new);
        sP[r * L::LP + lane + 32 * t] = sc_from_f<T>(p);
        sum += p;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      for (int c = lane; c < DVP; c += 32) sO[r * L::LO + c] *= alpha;
      __syncwarp();  // every lane has read sM[r] before lane 0 replaces it
      if (lane == 0) {
        sM[r] = m_new;
        sL[r] = sL[r] * alpha + sum;
      }
    }
    __syncwarp();

    // O += P V for this warp's 16 rows.
    if constexpr (Tr::TC) {
      using F = Mma<T>;
#pragma unroll
      for (int n = 0; n < DVP / 16; ++n) {
        typename F::Acc acc;
        wmma::load_matrix_sync(acc, sO + warp * 16 * L::LO + n * 16, L::LO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < BC; kk += F::K) {
          typename F::A fa;
          typename F::BRow fb;
          wmma::load_matrix_sync(fa, sP + warp * 16 * L::LP + kk, L::LP);
          wmma::load_matrix_sync(fb, sV + kk * L::LV + n * 16, L::LV);
          F::round(fa);
          F::round(fb);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(sO + warp * 16 * L::LO + n * 16, acc, L::LO, wmma::mem_row_major);
      }
    } else {
      float acc[16][DVP / 32];
#pragma unroll
      for (int r = 0; r < 16; ++r)
#pragma unroll
        for (int t = 0; t < DVP / 32; ++t) acc[r][t] = sO[(warp * 16 + r) * L::LO + lane + 32 * t];
      for (int j = 0; j < BC; ++j) {
        float vv[DVP / 32];
#pragma unroll
        for (int t = 0; t < DVP / 32; ++t) vv[t] = sc_to_f(sV[j * L::LV + lane + 32 * t]);
#pragma unroll
        for (int r = 0; r < 16; ++r) {
          const float p = sc_to_f(sP[(warp * 16 + r) * L::LP + j]);
#pragma unroll
          for (int t = 0; t < DVP / 32; ++t) acc[r][t] = fmaf(p, vv[t], acc[r][t]);
        }
      }
#pragma unroll
      for (int r = 0; r < 16; ++r)
#pragma unroll
        for (int t = 0; t < DVP / 32; ++t) sO[(warp * 16 + r) * L::LO + lane + 32 * t] = acc[r][t];
    }
    __syncwarp();
  }
  __syncthreads();

  // O / l, contiguous [BH, SQ, DV]. A row that saw no key (every score -inf) is NaN, as softmax
  // gives it, or zeros for _safe_softmax (scaled_dot_product_attention's).
  TO* out = a.o + bh * ((int64_t)Tr::SQ * DV);
  for (int e = threadIdx.x; e < BR * DV; e += NT) {
    const int r = e / DV, c = e % DV, i = i0 + r;
    if (i >= Tr::SQ) continue;
    const float l = sL[r];
    const float o = l > 0.0f ? sO[r * L::LO + c] / l * Tr::OUT_SCALE : (Tr::SAFE ? 0.0f : NAN);
    out[(int64_t)i * DV + c] = sc_from_f<TO>(o);
  }
}

// The same arithmetic, serially on the CPU: scores through Tr::score, a two-pass softmax in fp32
// (P rounded to T, as the kernel feeds it to the second product), O. For tests of the chain's
// meaning (masks, scale, causal, operand strides); the tiling is the GPU's alone.
template <class Tr>
void host(const typename Tr::Args& a) {
  using T = typename Tr::T;
  constexpr int D = Tr::D, DV = Tr::DV;
  float* s = new float[Tr::SK];
  float* o = new float[DV];
  for (int64_t bh = 0; bh < Tr::BH; ++bh) {
    const T* q = a.q + Tr::q_base(bh);
    const T* k = a.k + Tr::k_base(bh);
    const T* v = a.v + Tr::v_base(bh);
    for (int i = 0; i < Tr::SQ; ++i) {
      float m = -INFINITY;
      for (int j = 0; j < Tr::SK; ++j) {
        float acc = 0.0f;
        for (int d = 0; d < D; ++d)
          acc += sc_to_f(q[(int64_t)i * Tr::QSR + (int64_t)d * Tr::QSD]) * sc_to_f(k[(int64_t)j * Tr::KSR + (int64_t)d * Tr::KSD]);
        s[j] = Tr::score(a, bh, i, j, acc);
        m = fmaxf(m, s[j]);
      }
      float l = 0.0f;
      for (int c = 0; c < DV; ++c) o[c] = 0.0f;
      for (int j = 0; j < Tr::SK; ++j) {
        const float p = m == -INFINITY ? 0.0f : expf(s[j] - m);
        l += p;
        const float pr = sc_to_f(sc_from_f<T>(p));
        for (int c = 0; c < DV; ++c) o[c] += pr * sc_to_f(v[(int64_t)j * Tr::VSR + (int64_t)c * Tr::VSD]);
      }
      for (int c = 0; c < DV; ++c) {
        const float r = l > 0.0f ? o[c] / l * Tr::OUT_SCALE : (Tr::SAFE ? 0.0f : NAN);
        a.o[(bh * Tr::SQ + i) * DV + c] = sc_from_f<typename Tr::TO>(r);
      }
    }
  }
  delete[] s;
  delete[] o;
}

// Launch over every (batch·head, query tile): 16-byte loads where every operand allows them.
template <class Tr>
int launch(const typename Tr::Args& a, bool vec_ok, cudaStream_t stream) {
  using T = typename Tr::T;
  constexpr int DP = round_up(Tr::D, 32), DVP = round_up(Tr::DV, 32);
  constexpr int BYTES = Smem<T, Tr::BR, Tr::BC, DP, DVP, Tr::TC>::BYTES;
  constexpr int VEC = 16 / (int)sizeof(T);
  constexpr int64_t BLOCKS = (int64_t)Tr::BH * ((Tr::SQ + Tr::BR - 1) / Tr::BR);
  static_assert(BLOCKS < 2147483647LL, "grid too large");
  if (BLOCKS == 0) return 0;
  const bool vec = Tr::VEC_LAYOUT && vec_ok;
  auto fn = vec ? kernel<Tr, Tr::VEC_LAYOUT ? VEC : 1> : kernel<Tr, 1>;
  static bool sized[2] = {false, false};
  if (!sized[vec]) {  // above 48 KiB, dynamic shared memory must be asked for per kernel
    const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, BYTES);
    if (e != cudaSuccess) return (int)e;
    sized[vec] = true;
  }
  fn<<<(unsigned)BLOCKS, Tr::BR / 16 * 32, BYTES, stream>>>(a);
  return (int)cudaGetLastError();
}

}  // namespace sc_attn
#endif
