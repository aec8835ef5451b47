//! Fused attention (emit_attention.py): softmax(f(Q Kᵀ)) V in one kernel, flash-style. f is the
//! chain the Planner folded into the node (scale, additive or boolean masks, causal), given per
//! kernel by a traits struct `Tr` (shapes, strides, tile sizes, `Tr::score`); this block is the
//! fixed machinery every attention kernel of a .cu shares.
//!
//! One block per (batch·head, tile of BR query rows), BR / 16 warps, each warp owning 16 rows (so
//! the softmax needs no block-wide sync). For each tile of BC keys: K and V into shared memory,
//! S = Q Kᵀ, the online softmax (running max m and sum l per row; the output rows rescaled by
//! exp(m_old - m_new)), then O += P V. Two kernels:
//!  - tc_kernel (sm_80+): mma.sync on tensor cores, S, P and O in registers as the products'
//!    fragments. fp16/bf16 operands m16n8k16; fp32 as TF32 m16n8k8, each product optionally 3xTF32
//!    (operands split into a TF32 head and tail: fp32's accuracy on tensor cores). P feeds the
//!    second product straight from the first's accumulators: for TF32 the 8 keys of a k-step are
//!    taken in the order (2t, 2t+1) per lane, which is the accumulator's, and V's rows in the same
//!    order (a sum over keys does not care which order). K and V arrive by cp.async: the next
//!    tile's K loads while this tile's P V runs, its V while the next S runs.
//!  - fma_kernel: fp32 on the FMA units (the exact rung), S, P and O in shared memory.
//! With masks, a key tile they mask entirely for the block's rows is skipped (probed per tile, so a
//! causal buffer costs half). Causal chains stop at the last key tile a row of the block can see.
#ifndef SC_ATTENTION_H
#define SC_ATTENTION_H

namespace sc_attn {

SC_INLINE constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Rows of a shared tile are a multiple of 16 bytes (cp.async), and the 8 rows x 4 words a fragment
// load reads fall in 32 distinct banks only when a row is 16 bytes past a multiple of 128.
template <class T>
SC_INLINE constexpr int tc_ld(int cols) { return (round_up(cols * (int)sizeof(T), 128) + 16) / (int)sizeof(T); }

// Depth of one product step: TF32 m16n8k8, fp16/bf16 m16n8k16.
template <class T>
SC_INLINE constexpr int tc_k() { return sizeof(T) == 4 ? 8 : 16; }

// tc_kernel's shared memory: Q, K and V tiles, and for fp32 operands of a 3xTF32 product their
// tails beside them (emit_attention.smem_bytes mirrors it).
template <class T, int BR, int BC, int D, int DV, bool SQK, bool SPV>
struct TcSmem {
  static constexpr int DP = round_up(D, tc_k<T>()), DVP = round_up(DV, 8);
  static constexpr int LQ = tc_ld<T>(DP), LK = LQ, LV = tc_ld<T>(DVP);
  static constexpr int QB = round_up(BR * LQ * (int)sizeof(T), 128);
  static constexpr int KB = round_up(BC * LK * (int)sizeof(T), 128);
  static constexpr int VB = round_up(BC * LV * (int)sizeof(T), 128);
  static constexpr int Q = 0, K = Q + QB, V = K + KB;
  static constexpr int QLO = V + VB, KLO = QLO + (SQK ? QB : 0), VLO = KLO + (SQK ? KB : 0);
  static constexpr int BYTES = VLO + (SPV ? VB : 0);
};

// fp32 tiles as the tensor cores take them, each element once per block (not once per warp that
// reads it): rounded to TF32 in place, and with `SPLIT` its tail in `lo`. No-op for fp16/bf16.
template <class T, int NT, int ROWS, int CP, bool SPLIT>
__device__ __forceinline__ void tf32_tile(T* hi, T* lo, int ld) {
  if constexpr (sizeof(T) == 4) {
    float* h = reinterpret_cast<float*>(hi);
    float* l = reinterpret_cast<float*>(lo);
    for (int e = threadIdx.x; e < ROWS * CP; e += NT) {
      const int at = e / CP * ld + e % CP;
      const float x = h[at];
      const uint32_t head = SPLIT ? sc_tc_head(x) : sc_tc_tf32(x);
      h[at] = __uint_as_float(head);
      if constexpr (SPLIT) l[at] = __uint_as_float(sc_tc_tail(x, head));
    }
  }
}

// fma_kernel's: S, P and O live here too, in fp32 (the FMA path pads rows by one element so that
// lanes reading a column of K hit distinct banks).
template <class T, int BR, int BC, int DP, int DVP>
struct Smem {
  static constexpr int LQ = DP + 1, LK = DP + 1, LV = DVP + 1;
  static constexpr int LS = BC + 1, LP = BC + 1, LO = DVP + 1;
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
// finite: a zero P times a NaN V would still be NaN). ASYNC: 16-byte cp.async pieces, which the
// caller waits for (sc_tc_wait), when sc == 1 and every row start is aligned (checked by the
// launcher); else plain loads, done when this returns.
template <class T, int NT, int ROWS, int COLS, int CP, int64_t SR, int64_t SC_, bool ASYNC>
__device__ __forceinline__ void load_tile(T* dst, int ld, const T* src, int valid) {
  if constexpr (ASYNC) {
    constexpr int VEC = 16 / (int)sizeof(T);
    constexpr int CV = CP / VEC;
    for (int e = threadIdx.x; e < ROWS * CV; e += NT) {
      const int r = e / CV, c = (e % CV) * VEC;
      const bool ok = r < valid && c < COLS;
      sc_tc_cp16(dst + r * ld + c, ok ? src + (int64_t)r * SR + c : src, ok);
    }
  } else {
    for (int e = threadIdx.x; e < ROWS * CP; e += NT) {
      const int r = e / CP, c = e % CP;
      dst[r * ld + c] = (r < valid && c < COLS) ? src[(int64_t)r * SR + (int64_t)c * SC_] : sc_from_f<T>(0.0f);
    }
  }
}

// The last key tile (exclusive) a block of query rows from i0 can see: causal chains stop at the
// block's last row's diagonal.
template <class Tr>
__device__ __forceinline__ int key_tiles(int i0) {
  int tiles = (Tr::SK + Tr::BC - 1) / Tr::BC;
  if (Tr::CAUSAL) {
    const int64_t last = (int64_t)i0 + Tr::BR - 1 + Tr::DIAG;
    const int64_t seen = last < 0 ? 0 : last / Tr::BC + 1;
    tiles = seen < tiles ? (int)seen : tiles;
  }
  return tiles;
}

// The first key tile from `kt` on that the masks leave some score of the block's rows in (block-
// uniform). A tile whose every score the masks set to -inf (a causal buffer's upper triangle) adds
// nothing: probed with a zero score, so only the masks decide.
template <class Tr, int NT>
__device__ __forceinline__ int live_tile(const typename Tr::Args& a, int64_t bh, int i0, int kt, int tiles) {
  if constexpr (Tr::MASK_SKIP) {
    for (; kt < tiles; ++kt) {
      const int j0 = kt * Tr::BC;
      bool live = false;
      for (int e = threadIdx.x; e < Tr::BR * Tr::BC && !live; e += NT) {
        const int i = i0 + e / Tr::BC, j = j0 + e % Tr::BC;
        live = i < Tr::SQ && j < Tr::SK && Tr::score(a, bh, i, j, 0.0f) != -INFINITY;
      }
      if (__syncthreads_or(live)) return kt;
    }
  }
  return kt;
}

// Query tile of this block: causal blocks of late query tiles have the most key tiles and are
// scheduled first.
template <class Tr>
__device__ __forceinline__ int query_tile() {
  constexpr int TILES = (Tr::SQ + Tr::BR - 1) / Tr::BR;
  return Tr::CAUSAL ? TILES - 1 - (int)(blockIdx.x % TILES) : (int)(blockIdx.x % TILES);
}

// ------------------------------------------------------------------------------------------------
// Tensor cores. Fragment coordinates (PTX ISA, mma.m16n8k8 / m16n8k16): lane = 4 g + t; an
// accumulator holds (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) of its 16 x 8 tile.

// Threads of a tc_kernel block: a warp owns WM m16 tiles of rows (two share every K and V fragment
// a warp reads from shared memory, halving that traffic per row).
template <class Tr>
SC_INLINE constexpr int tc_threads() { return Tr::BR / (16 * Tr::WM) * 32; }

template <class Tr, bool ASYNC>
__global__ void __launch_bounds__(tc_threads<Tr>()) tc_kernel(typename Tr::Args a) {
  using T = typename Tr::T;
  using TO = typename Tr::TO;
  constexpr int BR = Tr::BR, BC = Tr::BC, D = Tr::D, DV = Tr::DV, WM = Tr::WM;
  constexpr bool F32 = sizeof(T) == 4;
  constexpr int KS = tc_k<T>();
  using L = TcSmem<T, BR, BC, D, DV, Tr::SPLIT_QK, Tr::SPLIT_PV>;
  constexpr int DP = L::DP, DVP = L::DVP;
  constexpr int NT = tc_threads<Tr>(), NS = BC / 8, NO = DVP / 8;
  constexpr float LOG2E = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + L::Q);
  T* sK = reinterpret_cast<T*>(smem + L::K);
  T* sV = reinterpret_cast<T*>(smem + L::V);
  // fp32 operands as TF32 bit patterns (rounded in place), and 3xTF32's tails where a product is split.
  const uint32_t* uQ = reinterpret_cast<const uint32_t*>(smem + L::Q);
  const uint32_t* uK = reinterpret_cast<const uint32_t*>(smem + L::K);
  const uint32_t* uV = reinterpret_cast<const uint32_t*>(smem + L::V);
  const uint32_t* uQlo = reinterpret_cast<const uint32_t*>(smem + L::QLO);
  const uint32_t* uKlo = reinterpret_cast<const uint32_t*>(smem + L::KLO);
  const uint32_t* uVlo = reinterpret_cast<const uint32_t*>(smem + L::VLO);

  constexpr int TILES = (Tr::SQ + BR - 1) / BR;
  const int64_t bh = (int64_t)blockIdx.x / TILES;
  const int i0 = query_tile<Tr>() * BR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int r0 = warp * 16 * WM;
  const T* kb = a.k + Tr::k_base(bh);
  const T* vb = a.v + Tr::v_base(bh);
  const int tiles = key_tiles<Tr>(i0);

  // In flight, in order: Q, K(kt), V(kt); each wait below leaves only the newest group pending.
  int kt = live_tile<Tr, NT>(a, bh, i0, 0, tiles);
  load_tile<T, NT, BR, D, DP, Tr::QSR, Tr::QSD, ASYNC>(sQ, L::LQ, a.q + Tr::q_base(bh) + (int64_t)i0 * Tr::QSR,
                                                        Tr::SQ - i0);
  sc_tc_commit();
  if (kt < tiles) load_tile<T, NT, BC, D, DP, Tr::KSR, Tr::KSD, ASYNC>(sK, L::LK, kb + (int64_t)kt * BC * Tr::KSR,
                                                                        Tr::SK - kt * BC);
  sc_tc_commit();
  if (kt < tiles) load_tile<T, NT, BC, DV, DVP, Tr::VSR, Tr::VSD, ASYNC>(sV, L::LV, vb + (int64_t)kt * BC * Tr::VSR,
                                                                          Tr::SK - kt * BC);
  sc_tc_commit();

  float o[WM][NO][4];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int n = 0; n < NO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mi][n][e] = 0.0f;
  // Running max and sum of this lane's rows g and g + 8 of each m tile.
  float m[WM][2], l[WM][2];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mi][h] = -INFINITY;
      l[mi][h] = 0.0f;
    }

  bool first = true;
  while (kt < tiles) {
    const int j0 = kt * BC;
    sc_tc_wait<1>();
    __syncthreads();  // Q and this tile's K are in
    if constexpr (F32) {
      if (first) tf32_tile<T, NT, BR, DP, Tr::SPLIT_QK>(sQ, reinterpret_cast<T*>(smem + L::QLO), L::LQ);
      tf32_tile<T, NT, BC, DP, Tr::SPLIT_QK>(sK, reinterpret_cast<T*>(smem + L::KLO), L::LK);
      __syncthreads();
    }
    first = false;

    // S = Q Kᵀ for this warp's rows: A from Q's rows, B[k][n] = K[n][k], each B fragment read once
    // for the warp's WM m tiles.
    float s[WM][NS][4];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP; kk += KS) {
      if constexpr (F32) {
        uint32_t ah[WM][4], al[WM][4];
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          const int qa = (r0 + mi * 16 + g) * L::LQ + kk + t;
          ah[mi][0] = uQ[qa];
          ah[mi][1] = uQ[qa + 8 * L::LQ];
          ah[mi][2] = uQ[qa + 4];
          ah[mi][3] = uQ[qa + 8 * L::LQ + 4];
#pragma unroll
          for (int e = 0; e < 4; ++e) al[mi][e] = 0u;
          if constexpr (Tr::SPLIT_QK) {
            al[mi][0] = uQlo[qa];
            al[mi][1] = uQlo[qa + 8 * L::LQ];
            al[mi][2] = uQlo[qa + 4];
            al[mi][3] = uQlo[qa + 8 * L::LQ + 4];
          }
        }
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          const int kb2 = (n * 8 + g) * L::LK + kk + t;
          const uint32_t bh2[2] = {uK[kb2], uK[kb2 + 4]};
          const uint32_t bl2[2] = {Tr::SPLIT_QK ? uKlo[kb2] : 0u, Tr::SPLIT_QK ? uKlo[kb2 + 4] : 0u};
#pragma unroll
          for (int mi = 0; mi < WM; ++mi) sc_tc_mma_split<Tr::SPLIT_QK>(s[mi][n], ah[mi], al[mi], bh2, bl2);
        }
      } else {
        uint32_t qa[WM][4];
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          const T* q0 = sQ + (r0 + mi * 16 + g) * L::LQ + kk + 2 * t;
          qa[mi][0] = *reinterpret_cast<const uint32_t*>(q0);
          qa[mi][1] = *reinterpret_cast<const uint32_t*>(q0 + 8 * L::LQ);
          qa[mi][2] = *reinterpret_cast<const uint32_t*>(q0 + 8);
          qa[mi][3] = *reinterpret_cast<const uint32_t*>(q0 + 8 * L::LQ + 8);
        }
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          const T* k0 = sK + (n * 8 + g) * L::LK + kk + 2 * t;
          const uint32_t kb2[2] = {*reinterpret_cast<const uint32_t*>(k0), *reinterpret_cast<const uint32_t*>(k0 + 8)};
#pragma unroll
          for (int mi = 0; mi < WM; ++mi) sc_tc_mma16<T>(s[mi][n], qa[mi], kb2);
        }
      }
    }

    // Online softmax over the tile: this lane's rows g and g + 8 of each m tile, the row max over
    // the lane's quad.
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = i0 + r0 + mi * 16 + g + (e >> 1) * 8, j = j0 + n * 8 + 2 * t + (e & 1);
          float v = -INFINITY;
          // (bounds that whole tiles never cross are not checked)
          if ((Tr::SQ % BR == 0 || i < Tr::SQ) && (Tr::SK % BC == 0 || j < Tr::SK)) v = Tr::score(a, bh, i, j, s[mi][n][e]);
          s[mi][n][e] = v;
          mx[e >> 1] = fmaxf(mx[e >> 1], v);
        }
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float m_new = fmaxf(m[mi][h], mx[h]);
        // With no key seen yet (m = -inf) O and l are zero and alpha is moot: 0 avoids inf - inf.
        alpha[h] = m[mi][h] == -INFINITY ? 0.0f : exp2f((m[mi][h] - m_new) * LOG2E);
        m[mi][h] = m_new;
      }
      float sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float mh = m[mi][e >> 1];
          // (s - m) first: large scores would lose the difference in s * log2e - m * log2e.
          const float p = mh == -INFINITY ? 0.0f : exp2f((s[mi][n][e] - mh) * LOG2E);
          s[mi][n][e] = p;
          sum[e >> 1] += p;
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) l[mi][h] = l[mi][h] * alpha[h] + sum[h];  // this lane's columns; the quad's at the end
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        o[mi][n][0] *= alpha[0];
        o[mi][n][1] *= alpha[0];
        o[mi][n][2] *= alpha[1];
        o[mi][n][3] *= alpha[1];
      }
    }

    const int next = live_tile<Tr, NT>(a, bh, i0, kt + 1, tiles);
    __syncthreads();  // every warp is done with this tile's K
    if (next < tiles) load_tile<T, NT, BC, D, DP, Tr::KSR, Tr::KSD, ASYNC>(sK, L::LK, kb + (int64_t)next * BC * Tr::KSR,
                                                                            Tr::SK - next * BC);
    sc_tc_commit();
    sc_tc_wait<1>();
    __syncthreads();  // this tile's V is in
    if constexpr (F32) {
      tf32_tile<T, NT, BC, DVP, Tr::SPLIT_PV>(sV, reinterpret_cast<T*>(smem + L::VLO), L::LV);
      __syncthreads();
    }

    // O += P V: P from S's accumulators, V's rows in the same key order.
    if constexpr (F32) {
#pragma unroll
      for (int jj = 0; jj < NS; ++jj) {
        uint32_t ah[WM][4], al[WM][4];
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          // keys 2t and 2t+1 of this 8-key step, rows g and g + 8
          const float pa[4] = {s[mi][jj][0], s[mi][jj][2], s[mi][jj][1], s[mi][jj][3]};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            ah[mi][e] = Tr::SPLIT_PV ? sc_tc_head(pa[e]) : sc_tc_tf32(pa[e]);
            al[mi][e] = Tr::SPLIT_PV ? sc_tc_tail(pa[e], ah[mi][e]) : 0u;
          }
        }
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          const int vb2 = (jj * 8 + 2 * t) * L::LV + n * 8 + g;
          const uint32_t bh2[2] = {uV[vb2], uV[vb2 + L::LV]};
          const uint32_t bl2[2] = {Tr::SPLIT_PV ? uVlo[vb2] : 0u, Tr::SPLIT_PV ? uVlo[vb2 + L::LV] : 0u};
#pragma unroll
          for (int mi = 0; mi < WM; ++mi) sc_tc_mma_split<Tr::SPLIT_PV>(o[mi][n], ah[mi], al[mi], bh2, bl2);
        }
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < NS / 2; ++jj) {
        uint32_t pa[WM][4];
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          pa[mi][0] = sc_tc_pack<T>(s[mi][2 * jj][0], s[mi][2 * jj][1]);
          pa[mi][1] = sc_tc_pack<T>(s[mi][2 * jj][2], s[mi][2 * jj][3]);
          pa[mi][2] = sc_tc_pack<T>(s[mi][2 * jj + 1][0], s[mi][2 * jj + 1][1]);
          pa[mi][3] = sc_tc_pack<T>(s[mi][2 * jj + 1][2], s[mi][2 * jj + 1][3]);
        }
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          const T* v0 = sV + (jj * 16 + 2 * t) * L::LV + n * 8 + g;
          const uint32_t vb2[2] = {sc_tc_pack2<T>(v0[0], v0[L::LV]), sc_tc_pack2<T>(v0[8 * L::LV], v0[9 * L::LV])};
#pragma unroll
          for (int mi = 0; mi < WM; ++mi) sc_tc_mma16<T>(o[mi][n], pa[mi], vb2);
        }
      }
    }
    __syncthreads();  // every warp is done with this tile's V
    if (next < tiles) load_tile<T, NT, BC, DV, DVP, Tr::VSR, Tr::VSD, ASYNC>(sV, L::LV, vb + (int64_t)next * BC * Tr::VSR,
                                                                              Tr::SK - next * BC);
    sc_tc_commit();
    kt = next;
  }
  sc_tc_wait<0>();

  // O / l, contiguous [BH, SQ, DV]. A row that saw no key (every score -inf) is NaN, as softmax
  // gives it, or zeros for _safe_softmax (scaled_dot_product_attention's).
  TO* out = a.o + bh * ((int64_t)Tr::SQ * DV);
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[mi][h] += __shfl_xor_sync(0xffffffffu, l[mi][h], 1);
      l[mi][h] += __shfl_xor_sync(0xffffffffu, l[mi][h], 2);
    }
#pragma unroll
    for (int n = 0; n < NO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = i0 + r0 + mi * 16 + g + (e >> 1) * 8, c = n * 8 + 2 * t + (e & 1);
        if (i >= Tr::SQ || c >= DV) continue;
        const float lv = l[mi][e >> 1];
        const float v = lv > 0.0f ? o[mi][n][e] / lv * Tr::OUT_SCALE : (Tr::SAFE ? 0.0f : NAN);
        out[(int64_t)i * DV + c] = sc_from_f<TO>(v);
      }
  }
}

// ------------------------------------------------------------------------------------------------
// fp32 FMA (the exact rung): S, P and O in shared memory, each warp's 16 rows row by row.

template <class Tr>
__global__ void __launch_bounds__(Tr::BR / 16 * 32) fma_kernel(typename Tr::Args a) {
  using T = typename Tr::T;
  using TO = typename Tr::TO;
  constexpr int BR = Tr::BR, BC = Tr::BC, D = Tr::D, DV = Tr::DV;
  constexpr int DP = round_up(D, 32), DVP = round_up(DV, 32);
  constexpr int NT = BR / 16 * 32;
  using L = Smem<T, BR, BC, DP, DVP>;
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
  const int i0 = query_tile<Tr>() * BR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  load_tile<T, NT, BR, D, DP, Tr::QSR, Tr::QSD, false>(sQ, L::LQ, a.q + Tr::q_base(bh) + (int64_t)i0 * Tr::QSR,
                                                        Tr::SQ - i0);
  for (int e = threadIdx.x; e < BR * L::LO; e += NT) sO[e] = 0.0f;
  for (int r = threadIdx.x; r < BR; r += NT) {
    sM[r] = -INFINITY;
    sL[r] = 0.0f;
  }

  const int tiles = key_tiles<Tr>(i0);
  const T* kb = a.k + Tr::k_base(bh);
  const T* vb = a.v + Tr::v_base(bh);
  for (int kt = live_tile<Tr, NT>(a, bh, i0, 0, tiles); kt < tiles; kt = live_tile<Tr, NT>(a, bh, i0, kt + 1, tiles)) {
    const int j0 = kt * BC;
    __syncthreads();  // the previous tile's K and V are no longer read
    load_tile<T, NT, BC, D, DP, Tr::KSR, Tr::KSD, false>(sK, L::LK, kb + (int64_t)j0 * Tr::KSR, Tr::SK - j0);
    load_tile<T, NT, BC, DV, DVP, Tr::VSR, Tr::VSD, false>(sV, L::LV, vb + (int64_t)j0 * Tr::VSR, Tr::SK - j0);
    __syncthreads();

    // S = Q Kᵀ for this warp's 16 rows.
    {
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
    {
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

// One kernel's launch; `slot` tells its variants apart for the one-time shared-memory opt-in.
// `static`: a function-local static of a template with external linkage is a GNU unique symbol,
// one per process, so a second library with a kernel of the same traits name would find `sized`
// set by the first, skip its own opt-in and fail its launch (invalid value) above 48 KiB.
template <class Tr, class F>
static int run(F fn, int slot, int threads, int bytes, const typename Tr::Args& a, cudaStream_t stream) {
  constexpr int64_t BLOCKS = (int64_t)Tr::BH * ((Tr::SQ + Tr::BR - 1) / Tr::BR);
  static_assert(BLOCKS < 2147483647LL, "grid too large");
  if (BLOCKS == 0) return 0;
  static bool sized[2] = {false, false};
  if (!sized[slot]) {  // above 48 KiB, dynamic shared memory must be asked for per kernel
    const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) return (int)e;
    sized[slot] = true;
  }
  fn<<<(unsigned)BLOCKS, threads, bytes, stream>>>(a);
  return (int)cudaGetLastError();
}

// Launch over every (batch·head, query tile): cp.async (16-byte pieces) where every operand allows it.
template <class Tr>
int launch(const typename Tr::Args& a, bool vec_ok, cudaStream_t stream) {
  using T = typename Tr::T;
  if constexpr (Tr::TC) {
    constexpr int BYTES = TcSmem<T, Tr::BR, Tr::BC, Tr::D, Tr::DV, Tr::SPLIT_QK, Tr::SPLIT_PV>::BYTES;
    if (Tr::VEC_LAYOUT && vec_ok) return run<Tr>(tc_kernel<Tr, Tr::VEC_LAYOUT>, 1, tc_threads<Tr>(), BYTES, a, stream);
    return run<Tr>(tc_kernel<Tr, false>, 0, tc_threads<Tr>(), BYTES, a, stream);
  } else {
    constexpr int BYTES = Smem<T, Tr::BR, Tr::BC, round_up(Tr::D, 32), round_up(Tr::DV, 32)>::BYTES;
    return run<Tr>(fma_kernel<Tr>, 0, Tr::BR / 16 * 32, BYTES, a, stream);
  }
}

}  // namespace sc_attn
#endif
