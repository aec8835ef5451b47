"""Reductions, softmax and scans: sum/mean/prod/nansum, amax/amin, max/min (values and indices),
argmax/argmin, logsumexp, var/std (and var_mean/std_mean), vector norms, _softmax/_log_softmax,
cumsum/cumprod.

Every op sees its operand as `N` outputs times `R` reduced elements. Output `o` (row-major over the
kept dims) starts at `base(o)` in the input and its element `r` (row-major over the reduced dims,
which is also the index argmax returns) lies `off(r)` further; both come from the operand's strides,
so views need no copy. The kernel shape follows where the reduced elements lie:

- rows: the innermost reduced dim has stride 1. A group of 1-32 lanes (short rows, several to a
  warp) or a block per output, threads striding the row with 16-byte vector loads; when outputs
  are too few to fill the GPU, each row is split into chunks whose partial states go to scratch,
  and a second kernel merges them.
- cols: otherwise (reducing a dim of stride `inner`). One thread per output looping over R, so a
  warp reads 32 neighbouring outputs' elements at once; split over R the same way when few.

An op is a C++ struct (`sc_red_*` in the shared block): a State, `add` of one element, `merge` of
two states (any order: argmax's ties go to the lower index whatever the order), and the results it
projects. Softmax and scans reuse the layouts: rows get a lane group or block per row (softmax keeps the
row in registers where it fits, else two passes with an online max/sum), cols a thread per row.

Each kernel has a `NAME_host` entry: reductions run the same per-thread parts serially and merge
them; softmax and scans run the per-row function the device's column path uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from stitchcuda.agents.coder.codegen import C_TYPES, ITEM_SIZE, KernelArg, c_float
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, OutSpec, launchers

FLOATS = ("float32", "float16", "bfloat16")
SMS = 132  # H100: sizes the splits of few-output reductions (launches do not depend on it)
BLOCK = 256  # threads of every block whose rows are warps, and of the column kernels
MAX_SPLITS = 4096

# ---------------------------------------------------------------------------------------------
# Shared CUDA: op structs, the per-thread part, group merges, and the row / column / final kernels

_HEADER = r"""
#ifndef SC_REDUCE_H
#define SC_REDUCE_H
// Reductions, softmax and scans (emit_reduce.py): fp32 math over fp32/fp16/bf16 storage.
#define SC_RED_BLOCK 256

SC_INLINE bool sc_finite(float x) { return fabsf(x) < INFINITY; }
template <class T> SC_INLINE void sc_red_put(T* p, float v) { *p = sc_from_f<T>(v); }
SC_INLINE void sc_red_put(int64_t* p, int64_t v) { *p = v; }

// Sum family: PRE maps each element, POST the total (means, norms).
enum { SC_PRE_ID, SC_PRE_ABS, SC_PRE_SQ, SC_PRE_NZ, SC_PRE_POW, SC_PRE_NAN0 };
enum { SC_POST_ID, SC_POST_MUL, SC_POST_SQRT, SC_POST_ROOT };
template <int PRE, int POST>
struct sc_red_sum {
  float p0, p1;  // p0: exponent of PRE_POW; p1: factor of POST_MUL, 1/p of POST_ROOT
  struct State { float s; };
  SC_INLINE State init() const { return {0.0f}; }
  SC_INLINE void add(State& a, float x, int64_t) const {
    if (PRE == SC_PRE_ABS) x = fabsf(x);
    if (PRE == SC_PRE_SQ) x = x * x;
    if (PRE == SC_PRE_NZ) x = x != 0.0f ? 1.0f : 0.0f;
    if (PRE == SC_PRE_POW) x = powf(fabsf(x), p0);
    if (PRE == SC_PRE_NAN0) x = x != x ? 0.0f : x;
    a.s += x;
  }
  SC_INLINE void merge(State& a, const State& b) const { a.s += b.s; }
  SC_INLINE float value(const State& a) const {
    if (POST == SC_POST_MUL) return a.s * p1;
    if (POST == SC_POST_SQRT) return sqrtf(a.s);
    if (POST == SC_POST_ROOT) return powf(a.s, p1);
    return a.s;
  }
  SC_INLINE float second(const State&) const { return 0.0f; }
};

struct sc_red_prod {
  float p0, p1;
  struct State { float s; };
  SC_INLINE State init() const { return {1.0f}; }
  SC_INLINE void add(State& a, float x, int64_t) const { a.s *= x; }
  SC_INLINE void merge(State& a, const State& b) const { a.s *= b.s; }
  SC_INLINE float value(const State& a) const { return a.s; }
  SC_INLINE float second(const State&) const { return 0.0f; }
};

// amax/amin and the inf norms: NaN wins, as PyTorch's max_propagate_nan.
template <bool MAX, bool ABS>
struct sc_red_ext {
  float p0, p1;
  struct State { float m; };
  SC_INLINE State init() const { return {MAX ? -INFINITY : INFINITY}; }
  SC_INLINE static bool beats(float x, float m) { return x != x || (MAX ? x > m : x < m); }
  SC_INLINE void add(State& a, float x, int64_t) const {
    if (ABS) x = fabsf(x);
    if (beats(x, a.m)) a.m = x;
  }
  SC_INLINE void merge(State& a, const State& b) const { if (beats(b.m, a.m)) a.m = b.m; }
  SC_INLINE float value(const State& a) const { return a.m; }
  SC_INLINE float second(const State&) const { return 0.0f; }
};

// max.dim/argmax: ATen's GreaterOrNan. The first NaN wins, ties go to the lower index. The start
// (-inf, 0) never decides wrongly: it only survives when every element is -inf, and then 0 is right.
template <bool MAX>
struct sc_red_arg {
  float p0, p1;
  struct State { float v; int32_t pad; int64_t i; };
  SC_INLINE State init() const { return {MAX ? -INFINITY : INFINITY, 0, 0}; }
  SC_INLINE void add(State& a, float x, int64_t i) const {  // i grows within one thread's part
    if (x != x ? a.v == a.v : (MAX ? x > a.v : x < a.v)) { a.v = x; a.i = i; }
  }
  SC_INLINE void merge(State& a, const State& b) const {
    bool take;
    if (b.v != b.v) take = a.v == a.v || b.i < a.i;
    else if (a.v != a.v) take = false;
    else take = a.v == b.v ? b.i < a.i : (MAX ? b.v > a.v : b.v < a.v);
    if (take) a = b;
  }
  SC_INLINE float value(const State& a) const { return a.v; }
  SC_INLINE int64_t second(const State& a) const { return a.i; }
};

// var/std: Welford per thread, Chan's merge (ATen's WelfordOps); p0 is the correction.
template <bool STD>
struct sc_red_welford {
  float p0, p1;
  struct State { float n, mean, m2; };
  SC_INLINE State init() const { return {0.0f, 0.0f, 0.0f}; }
  SC_INLINE void add(State& a, float x, int64_t) const {
    a.n += 1.0f;
    const float d = x - a.mean;
    a.mean += d / a.n;
    a.m2 += d * (x - a.mean);
  }
  SC_INLINE void merge(State& a, const State& b) const {
    if (b.n == 0.0f) return;
    if (a.n == 0.0f) { a = b; return; }
    const float n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
    a.mean += d * f;
    a.m2 += b.m2 + d * d * a.n * f;
    a.n = n;
  }
  SC_INLINE float value(const State& a) const {
    const float v = a.m2 / (a.n > p0 ? a.n - p0 : 0.0f);
    return STD ? sqrtf(v) : v;
  }
  SC_INLINE float second(const State& a) const { return a.mean; }
};

// logsumexp: running max m and s = sum exp(x - m). Non-finite maxima give what ATen's
// logsumexp gives (it computes with the max replaced by 0 there): +inf, -inf or NaN.
struct sc_red_lse {
  float p0, p1;
  struct State { float m, s; };
  SC_INLINE State init() const { return {-INFINITY, 0.0f}; }
  SC_INLINE void add(State& a, float x, int64_t) const {
    if (x > a.m) { a.s = a.s * expf(a.m - x) + 1.0f; a.m = x; }
    else if (x != x) a.m = x;
    else if (sc_finite(a.m)) a.s += expf(x - a.m);
  }
  SC_INLINE void merge(State& a, const State& b) const {
    if (a.m != a.m || b.m != b.m) { a.m = a.m + b.m; return; }
    const float m = fmaxf(a.m, b.m);
    if (sc_finite(m)) a.s = a.s * expf(a.m - m) + b.s * expf(b.m - m);
    a.m = m;
  }
  SC_INLINE float value(const State& a) const { return sc_finite(a.m) ? a.m + logf(a.s) : a.m; }
  SC_INLINE float second(const State&) const { return 0.0f; }
};

// One thread's share of output o's elements [lo, hi): lo + t, lo + t + tpr, ... With VEC > 1 the
// reduced elements are contiguous (Ix::off(r) == r): a scalar head up to 16-byte alignment, vectors,
// a scalar tail. Each thread meets its elements in increasing r.
template <class Op, class Ix, int VEC, class T>
SC_INLINE typename Op::State sc_red_part(const Op& op, const T* __restrict__ x, int64_t o, int64_t lo,
                                         int64_t hi, int t, int tpr) {
  typename Op::State st = op.init();
  const T* row = x + Ix::base(o);
  if constexpr (VEC > 1) {
    int64_t head = (int64_t)((reinterpret_cast<uintptr_t>(row + lo) / sizeof(T)) % VEC);
    head = head ? VEC - head : 0;
    if (head > hi - lo) head = hi - lo;
    for (int64_t r = lo + t; r < lo + head; r += tpr) op.add(st, sc_to_f(row[r]), r);
    const int64_t start = lo + head, nv = (hi - start) / VEC;
    const sc_vec<T, VEC>* v = reinterpret_cast<const sc_vec<T, VEC>*>(row + start);
#pragma unroll 4
    for (int64_t k = t; k < nv; k += tpr) {
      const sc_vec<T, VEC> c = v[k];
#pragma unroll
      for (int l = 0; l < VEC; ++l) op.add(st, sc_to_f(c.v[l]), start + k * VEC + l);
    }
    for (int64_t r = start + nv * VEC + t; r < hi; r += tpr) op.add(st, sc_to_f(row[r]), r);
  } else {
#pragma unroll 4
    for (int64_t r = lo + t; r < hi; r += tpr) op.add(st, sc_to_f(row[Ix::off(r)]), r);
  }
  return st;
}

template <class S>
__device__ __forceinline__ S sc_red_shfl_xor(const S& s, int d) {
  static_assert(sizeof(S) % 4 == 0, "states are whole 32-bit words");
  S out;
  const unsigned* src = reinterpret_cast<const unsigned*>(&s);
  unsigned* dst = reinterpret_cast<unsigned*>(&out);
#pragma unroll
  for (int k = 0; k < (int)(sizeof(S) / 4); ++k) dst[k] = __shfl_xor_sync(0xffffffffu, src[k], d);
  return out;
}

// Merge the states of a group of TPR threads: aligned lanes of one warp (TPR <= 32), or the whole
// block (TPR > 32, then blockDim.x == TPR). Every thread of the group gets the result.
template <int TPR, class Op>
__device__ __forceinline__ typename Op::State sc_red_all(const Op& op, typename Op::State st) {
  using S = typename Op::State;
#pragma unroll
  for (int d = (TPR < 32 ? TPR : 32) / 2; d > 0; d >>= 1) op.merge(st, sc_red_shfl_xor(st, d));
  if constexpr (TPR > 32) {
    __shared__ S buf[TPR / 32];
    if (threadIdx.x % 32 == 0) buf[threadIdx.x / 32] = st;
    __syncthreads();
    st = buf[0];
#pragma unroll
    for (int k = 1; k < TPR / 32; ++k) op.merge(st, buf[k]);
    __syncthreads();  // buf is written again by the group's next call
  }
  return st;
}

// This thread's group, of n: -1 where a whole warp or block has none (it returns). Groups of fewer
// than 32 threads past the end share a warp with live ones: they redo the last group, so every lane
// takes part in the shuffles, and write nothing.
template <int TPR, int BS>
__device__ __forceinline__ int64_t sc_red_group(int64_t n) {
  const int64_t g = (int64_t)blockIdx.x * (BS / TPR) + threadIdx.x / TPR;
  if (g < n) return g;
  if (TPR >= 32 || ((int64_t)blockIdx.x * (BS / TPR) + (threadIdx.x & ~31) / TPR) >= n) return -1;
  return n - 1;
}
#define SC_RED_LIVE(n) ((int64_t)blockIdx.x * (BS / TPR) + threadIdx.x / TPR < (n))

// A group's result: to the outputs, or to scratch part[o][s] when the rows are split.
template <class Op, class TA, class TB>
SC_INLINE void sc_red_store(const Op& op, const typename Op::State& st, int64_t o, int64_t s, int64_t splits,
                            TA* ya, TB* yb, typename Op::State* part) {
  if (splits > 1) { part[o * splits + s] = st; return; }
  if (ya) sc_red_put(ya + o, op.value(st));
  if (yb) sc_red_put(yb + o, op.second(st));
}

// Rows: group g (TPR threads) reduces chunk g % splits of output g / splits.
template <class Op, class Ix, int VEC, int TPR, class T, class TA, class TB>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_red_rows(const Op op, const T* __restrict__ x, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
            int64_t splits) {
  constexpr int BS = TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR;
  const int64_t g = sc_red_group<TPR, BS>(Ix::N * splits);
  if (g < 0) return;
  const int t = threadIdx.x % TPR;
  const int64_t o = g / splits, s = g % splits, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
  const auto st = sc_red_all<TPR>(op, sc_red_part<Op, Ix, VEC>(op, x, o, lo, hi, t, TPR));
  if (t == 0 && SC_RED_LIVE(Ix::N * splits)) sc_red_store(op, st, o, s, splits, ya, yb, part);
}

template <class Op, class Ix, int VEC, int TPR, class T, class TA, class TB>
static void sc_red_rows_host(const Op op, const T* x, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
                             int64_t splits) {
  for (int64_t g = 0; g < Ix::N * splits; ++g) {
    const int64_t o = g / splits, s = g % splits, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
    auto st = op.init();
    for (int t = 0; t < TPR; ++t) op.merge(st, sc_red_part<Op, Ix, VEC>(op, x, o, lo, hi, t, TPR));
    sc_red_store(op, st, o, s, splits, ya, yb, part);
  }
}

// Columns: thread g reduces chunk g / N of output g % N (neighbouring threads, neighbouring outputs).
template <class Op, class Ix, class T, class TA, class TB>
__global__ void __launch_bounds__(SC_RED_BLOCK)
sc_red_cols(const Op op, const T* __restrict__ x, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
            int64_t splits) {
  const int64_t g = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (g >= Ix::N * splits) return;
  const int64_t o = g % Ix::N, s = g / Ix::N, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
  sc_red_store(op, sc_red_part<Op, Ix, 1>(op, x, o, lo, hi, 0, 1), o, s, splits, ya, yb, part);
}

template <class Op, class Ix, class T, class TA, class TB>
static void sc_red_cols_host(const Op op, const T* x, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
                             int64_t splits) {
  for (int64_t g = 0; g < Ix::N * splits; ++g) {
    const int64_t o = g % Ix::N, s = g / Ix::N, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
    sc_red_store(op, sc_red_part<Op, Ix, 1>(op, x, o, lo, hi, 0, 1), o, s, splits, ya, yb, part);
  }
}

// Second pass of split reductions: a warp merges one output's partial states.
template <class Op, class TA, class TB>
__global__ void __launch_bounds__(SC_RED_BLOCK)
sc_red_final(const Op op, const typename Op::State* __restrict__ part, int64_t n, int64_t splits, TA* ya, TB* yb) {
  const int64_t o = (int64_t)blockIdx.x * (SC_RED_BLOCK / 32) + threadIdx.x / 32;
  if (o >= n) return;
  auto st = op.init();
  for (int64_t s = threadIdx.x % 32; s < splits; s += 32) op.merge(st, part[o * splits + s]);
  st = sc_red_all<32>(op, st);
  if (threadIdx.x % 32 == 0) sc_red_store(op, st, o, 0, 1, ya, yb, (typename Op::State*)nullptr);
}

template <class Op, class TA, class TB>
static void sc_red_final_host(const Op op, const typename Op::State* part, int64_t n, int64_t splits, TA* ya, TB* yb) {
  for (int64_t o = 0; o < n; ++o) {
    auto st = op.init();
    for (int64_t s = 0; s < splits; ++s) op.merge(st, part[o * splits + s]);
    sc_red_store(op, st, o, 0, 1, ya, yb, (typename Op::State*)nullptr);
  }
}

// Softmax: out = exp(x - m) / s, log_softmax: x - m - log(s), m the row max, s = sum exp(x - m).
// MODE: 0 softmax, 1 log_softmax, 2 _safe_softmax (a row that is all -inf gives 0s, not NaNs: what
// scaled_dot_product_attention's math path uses for fully masked rows).
#define SC_SOFTMAX_LOG 1
#define SC_SOFTMAX_SAFE 2
template <int MODE>
SC_INLINE float sc_softmax_out(float x, float m, float d) {
  if (MODE == SC_SOFTMAX_LOG) return x - m - d;
  if (MODE == SC_SOFTMAX_SAFE && m == -INFINITY) return 0.0f;
  return expf(x - m) / d;
}

// The divisor from an online state: NaN where the max is not finite, as ATen's softmax gets there.
template <int MODE>
SC_INLINE float sc_softmax_div(const sc_red_lse::State& st) {
  if (MODE == SC_SOFTMAX_SAFE && st.m == -INFINITY) return 1.0f;  // unused: the row is all zeros
  return sc_finite(st.m) ? (MODE == SC_SOFTMAX_LOG ? logf(st.s) : st.s) : NAN;
}

// One row (output o of the layout) serially: the column kernel, and every host entry.
template <class Ix, int MODE, int64_t INNER, class T, class TO>
SC_INLINE void sc_softmax_col(const T* __restrict__ x, TO* __restrict__ y, int64_t o) {
  const sc_red_lse op{0.0f, 0.0f};
  const auto st = sc_red_part<sc_red_lse, Ix, 1>(op, x, o, 0, Ix::R, 0, 1);
  const float d = sc_softmax_div<MODE>(st);
  const T* row = x + Ix::base(o);
  TO* out = y + (o / INNER) * Ix::R * INNER + o % INNER;
  for (int64_t r = 0; r < Ix::R; ++r)
    out[r * INNER] = sc_from_f<TO>(sc_softmax_out<MODE>(sc_to_f(row[Ix::off(r)]), st.m, d));
}

template <class Ix, int MODE, int64_t INNER, class T, class TO>
__global__ void __launch_bounds__(SC_RED_BLOCK) sc_softmax_cols(const T* __restrict__ x, TO* __restrict__ y) {
  const int64_t o = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (o < Ix::N) sc_softmax_col<Ix, MODE, INNER>(x, y, o);
}

// A row that fits in registers: ITEMS chunks of VEC elements per thread, read once.
template <class Ix, int MODE, int VEC, int TPR, int ITEMS, class T, class TO>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_softmax_rows_reg(const T* __restrict__ x, TO* __restrict__ y) {
  constexpr int BS = TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR;
  const int64_t g = sc_red_group<TPR, BS>(Ix::N);
  if (g < 0) return;
  const int t = threadIdx.x % TPR;
  const bool live = SC_RED_LIVE(Ix::N);
  const T* row = x + Ix::base(g);
  TO* out = y + g * Ix::R;
  float v[ITEMS][VEC];
  const sc_red_ext<true, false> mx{0.0f, 0.0f};
  auto m = mx.init();
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int64_t r = ((int64_t)k * TPR + t) * VEC;
    if (r < Ix::R) {
      if constexpr (VEC > 1) {
        const sc_vec<T, VEC> c = sc_load<VEC>(row + r);
#pragma unroll
        for (int l = 0; l < VEC; ++l) v[k][l] = sc_to_f(c.v[l]);
      } else {
        v[k][0] = sc_to_f(row[r]);
      }
#pragma unroll
      for (int l = 0; l < VEC; ++l) mx.add(m, v[k][l], 0);
    }
  }
  m = sc_red_all<TPR>(mx, m);
  const sc_red_sum<SC_PRE_ID, SC_POST_ID> sm{0.0f, 0.0f};
  auto s = sm.init();
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (((int64_t)k * TPR + t) * VEC >= Ix::R) continue;
#pragma unroll
    for (int l = 0; l < VEC; ++l) sm.add(s, expf(v[k][l] - m.m), 0);
  }
  s = sc_red_all<TPR>(sm, s);
  const float d = MODE == SC_SOFTMAX_LOG ? logf(s.s) : s.s;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int64_t r = ((int64_t)k * TPR + t) * VEC;
    if (live && r < Ix::R) {
      sc_vec<TO, VEC> c;
#pragma unroll
      for (int l = 0; l < VEC; ++l) c.v[l] = sc_from_f<TO>(sc_softmax_out<MODE>(v[k][l], m.m, d));
      sc_store<VEC>(out + r, c);
    }
  }
}

// A longer row: an online max/sum pass (vector loads), then a pass that writes.
template <class Ix, int MODE, int VEC, int WVEC, int TPR, class T, class TO>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_softmax_rows(const T* __restrict__ x, TO* __restrict__ y) {
  constexpr int BS = TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR;
  const int64_t g = sc_red_group<TPR, BS>(Ix::N);
  if (g < 0) return;
  const int t = threadIdx.x % TPR;
  const sc_red_lse op{0.0f, 0.0f};
  const auto st = sc_red_all<TPR>(op, sc_red_part<sc_red_lse, Ix, VEC>(op, x, g, 0, Ix::R, t, TPR));
  if (!SC_RED_LIVE(Ix::N)) return;
  const float d = sc_softmax_div<MODE>(st);
  const T* row = x + Ix::base(g);
  TO* out = y + g * Ix::R;
#pragma unroll 4
  for (int64_t r = (int64_t)t * WVEC; r < Ix::R; r += (int64_t)TPR * WVEC) {
    const sc_vec<T, WVEC> c = sc_load<WVEC>(row + r);
    sc_vec<TO, WVEC> o;
#pragma unroll
    for (int l = 0; l < WVEC; ++l) o.v[l] = sc_from_f<TO>(sc_softmax_out<MODE>(sc_to_f(c.v[l]), st.m, d));
    sc_store<WVEC>(out + r, o);
  }
}

// Inclusive scans (cumsum, cumprod) in fp32.
template <bool PROD> SC_INLINE float sc_scan_op(float a, float b) { return PROD ? a * b : a + b; }

// A product rounded to the result's type, as ATen's cumprod multiplies in scalar_t: where the
// running product leaves fp16's range matters, since 0 and inf stick.
template <class TO> SC_INLINE float sc_scan_round(float v) { return sc_to_f(sc_from_f<TO>(v)); }

template <class Ix, bool PROD, int64_t INNER, class T, class TO>
SC_INLINE void sc_scan_col(const T* __restrict__ x, TO* __restrict__ y, int64_t o) {
  const T* row = x + Ix::base(o);
  TO* out = y + (o / INNER) * Ix::R * INNER + o % INNER;
  float acc = PROD ? 1.0f : 0.0f;
  for (int64_t r = 0; r < Ix::R; ++r) {
    acc = sc_scan_op<PROD>(acc, sc_to_f(row[Ix::off(r)]));
    if (PROD) acc = sc_scan_round<TO>(acc);
    out[r * INNER] = sc_from_f<TO>(acc);
  }
}

template <class Ix, bool PROD, int64_t INNER, class T, class TO>
__global__ void __launch_bounds__(SC_RED_BLOCK) sc_scan_cols(const T* __restrict__ x, TO* __restrict__ y) {
  const int64_t o = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (o < Ix::N) sc_scan_col<Ix, PROD, INNER>(x, y, o);
}

// A row in tiles of TPR * VEC: each thread scans its VEC elements, the group scans the threads'
// totals (warp shuffles, then the warps' totals), and a carry runs from tile to tile.
template <class Ix, bool PROD, int VEC, int TPR, class T, class TO>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_scan_rows(const T* __restrict__ x, TO* __restrict__ y) {
  constexpr int BS = TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR;
  constexpr int W = TPR < 32 ? TPR : 32;  // shuffle width: the group, or a warp of it
  const int64_t g = sc_red_group<TPR, BS>(Ix::N);
  if (g < 0) return;
  const bool live = SC_RED_LIVE(Ix::N);
  const int t = threadIdx.x % TPR, lane = threadIdx.x % W;
  const T* row = x + Ix::base(g);
  TO* out = y + g * Ix::R;
  const float id = PROD ? 1.0f : 0.0f;
  float carry = id;
  for (int64_t tile = 0; tile < Ix::R; tile += (int64_t)TPR * VEC) {
    const int64_t r0 = tile + (int64_t)t * VEC;
    const bool full = r0 + VEC <= Ix::R;
    float v[VEC];
    if (VEC > 1 && full) {
      const sc_vec<T, VEC> c = sc_load<VEC>(row + r0);
#pragma unroll
      for (int l = 0; l < VEC; ++l) v[l] = sc_to_f(c.v[l]);
    } else {
#pragma unroll
      for (int l = 0; l < VEC; ++l) v[l] = r0 + l < Ix::R ? sc_to_f(row[r0 + l]) : id;
    }
#pragma unroll
    for (int l = 1; l < VEC; ++l) v[l] = sc_scan_op<PROD>(v[l - 1], v[l]);
    float inc = v[VEC - 1];
#pragma unroll
    for (int d = 1; d < W; d <<= 1) {
      const float n = __shfl_up_sync(0xffffffffu, inc, d, W);
      if (lane >= d) inc = sc_scan_op<PROD>(n, inc);
    }
    float before = __shfl_up_sync(0xffffffffu, inc, 1, W), total;
    if (lane == 0) before = id;
    if constexpr (TPR > 32) {
      __shared__ float wsum[TPR / 32];
      if (lane == 31) wsum[t / 32] = inc;
      __syncthreads();
      float wb = id;
      total = id;
#pragma unroll
      for (int k = 0; k < TPR / 32; ++k) {
        if (k < t / 32) wb = sc_scan_op<PROD>(wb, wsum[k]);
        total = sc_scan_op<PROD>(total, wsum[k]);
      }
      __syncthreads();
      before = sc_scan_op<PROD>(wb, before);
    } else {
      total = __shfl_sync(0xffffffffu, inc, W - 1, W);
    }
    const float start = sc_scan_op<PROD>(carry, before);
    if (live && VEC > 1 && full) {
      sc_vec<TO, VEC> c;
#pragma unroll
      for (int l = 0; l < VEC; ++l) c.v[l] = sc_from_f<TO>(sc_scan_op<PROD>(start, v[l]));
      sc_store<VEC>(out + r0, c);
    } else if (live) {
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        if (r0 + l < Ix::R) out[r0 + l] = sc_from_f<TO>(sc_scan_op<PROD>(start, v[l]));
    }
    carry = sc_scan_op<PROD>(carry, total);
  }
}

// cumprod along rows, in exactly ATen's CUDA order (ScanUtils.cuh, scan_innermost_dim): chunks of C,
// the running product multiplied into each chunk's first element, then a Sklansky scan of the chunk.
// Products do not associate once they leave fp32's range: 0 and inf stick, 0 * inf is NaN, and a
// product that meets the subnormals keeps its lost digits. A tile-wide scan whose partial products
// (thousands of elements) reached inf while the running product had reached 0 gave NaN where torch's
// partial products, of at most C / 2 elements, stay finite; so only torch's order gives torch's result.
SC_INLINE int sc_sklansky_src(int k, int m) { return (k & ~((2 << m) - 1)) + (1 << m) - 1; }

// C threads per row (C >= 32), one element each per chunk; U chunks are loaded before any is scanned,
// so a warp keeps several loads in flight while the carry runs serially.
template <class Ix, int C, int U, class T, class TO>
__global__ void __launch_bounds__(C < SC_RED_BLOCK ? SC_RED_BLOCK : C)
sc_cumprod_rows(const T* __restrict__ x, TO* __restrict__ y) {
  constexpr int BS = C < SC_RED_BLOCK ? SC_RED_BLOCK : C;
  static_assert(C % 32 == 0, "whole warps per row");
  const int64_t g0 = (int64_t)blockIdx.x * (BS / C) + threadIdx.x / C;
  const bool live = g0 < Ix::N;
  const int64_t g = live ? g0 : Ix::N - 1;  // past the end: redo the last row, for the barriers
  const int k = threadIdx.x % C, lane = threadIdx.x % 32, warp0 = (threadIdx.x - k) / 32;
  const T* row = x + Ix::base(g);
  TO* out = y + g * Ix::R;
  __shared__ float last[BS / 32];
  float carry = 1.0f;
  for (int64_t t0 = 0; t0 < Ix::R; t0 += (int64_t)U * C) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t r = t0 + (int64_t)u * C + k;
      v[u] = r < Ix::R ? sc_to_f(row[Ix::off(r)]) : 1.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float a = v[u];
      if (k == 0) a = sc_scan_round<TO>(a * carry);
#pragma unroll
      for (int m = 0; m < 5; ++m) {
        const float n = __shfl_sync(0xffffffffu, a, sc_sklansky_src(lane, m));
        if (lane & (1 << m)) a = sc_scan_round<TO>(a * n);
      }
#pragma unroll
      for (int m = 5; (1 << m) < C; ++m) {  // sources are the last lanes of other warps
        if (lane == 31) last[threadIdx.x / 32] = a;
        __syncthreads();
        if (k & (1 << m)) a = sc_scan_round<TO>(a * last[warp0 + sc_sklansky_src(k, m) / 32]);
        __syncthreads();
      }
      if constexpr (C == 32) {
        carry = __shfl_sync(0xffffffffu, a, 31);
      } else {
        if (k == C - 1) last[warp0] = a;
        __syncthreads();
        carry = last[warp0];
        __syncthreads();
      }
      const int64_t r = t0 + (int64_t)u * C + k;
      if (live && r < Ix::R) out[r] = sc_from_f<TO>(a);
    }
  }
}

// The same arithmetic serially, for the host entry.
template <class Ix, int C, class T, class TO>
static void sc_cumprod_row_host(const T* x, TO* y, int64_t o) {
  const T* row = x + Ix::base(o);
  TO* out = y + o * Ix::R;
  float buf[C], carry = 1.0f;
  for (int64_t c0 = 0; c0 < Ix::R; c0 += C) {
    for (int k = 0; k < C; ++k) buf[k] = c0 + k < Ix::R ? sc_to_f(row[Ix::off(c0 + k)]) : 1.0f;
    buf[0] = sc_scan_round<TO>(buf[0] * carry);
    for (int m = 0; (1 << m) < C; ++m)
      for (int k = 0; k < C; ++k)
        if (k & (1 << m)) buf[k] = sc_scan_round<TO>(buf[k] * buf[sc_sklansky_src(k, m)]);
    for (int k = 0; k < C && c0 + k < Ix::R; ++k) out[c0 + k] = sc_from_f<TO>(buf[k]);
    carry = buf[C - 1];
  }
}
#endif  // SC_REDUCE_H
"""


# ---------------------------------------------------------------------------------------------
# Layout: the operand as N outputs x R reduced elements


@dataclass(frozen=True)
class Layout:
    kept: tuple[tuple[int, int], ...]  # (size, stride) of the kept dims, merged where they nest
    red: tuple[tuple[int, int], ...]  # the same for the reduced dims
    offset: int
    n: int
    r: int

    @property
    def contig(self) -> bool:
        """The reduced elements of an output are one contiguous run: off(r) == r."""
        return len(self.red) == 1 and self.red[0][1] == 1

    @property
    def rows(self) -> bool:
        """The innermost reduced dim is contiguous: groups of threads share a row."""
        return bool(self.red) and self.red[-1][1] == 1

    def aligned(self, vec: int) -> bool:
        """Every row start is a multiple of vec elements from the base pointer."""
        return self.offset % vec == 0 and all(s % vec == 0 for n, s in self.kept if n > 1)


def _merge(dims: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Size-1 dims dropped; a dim folded into the one before it where the strides nest."""
    out: list[tuple[int, int]] = []
    for size, stride in dims:
        if size == 1:
            continue
        if out and out[-1][1] == stride * size:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return tuple(out)


def _layout(src: Operand, reduced: Sequence[int]) -> Layout:
    dims = list(zip(src.shape, src.strides, strict=True))
    kept = _merge([d for i, d in enumerate(dims) if i not in reduced])
    red = _merge([d for i, d in enumerate(dims) if i in reduced])
    return Layout(kept, red, src.offset, math.prod(n for n, _ in kept), math.prod(n for n, _ in red))


def _ix_source(name: str, lay: Layout) -> str:
    def walk(var: str, dims: tuple[tuple[int, int], ...], start: int) -> str:
        lines = [f"int64_t at = {start}LL;"]
        for k in reversed(range(len(dims))):
            size, stride = dims[k]
            if k:
                lines += [f"at += ({var} % {size}LL) * {stride}LL;", f"{var} /= {size}LL;"]
            else:
                lines += [f"at += {var} * {stride}LL;"]
        if not dims:
            lines.append(f"(void){var};")
        return " ".join([*lines, "return at;"])

    return f"""
struct {name}_ix {{
  static constexpr int64_t N = {lay.n}LL, R = {lay.r}LL;
  SC_INLINE static int64_t base(int64_t o) {{ {walk("o", lay.kept, lay.offset)} }}
  SC_INLINE static int64_t off(int64_t r) {{ {walk("r", lay.red, 0)} }}
}};
"""


# ---------------------------------------------------------------------------------------------
# Arguments


def _source(ctx: EmitContext) -> Operand:
    src = ctx.args.get("self")
    if not isinstance(src, Operand):
        raise NotSupported("the input is not a tensor")
    if src.dtype not in FLOATS:
        raise NotSupported(f"input dtype {src.dtype} is not supported (fp32/fp16/bf16 only)")
    if src.numel == 0:
        raise NotSupported(f"empty input {list(src.shape)}")
    return src


def _dims(value: Any, rank: int) -> list[int]:
    """Reduced dims, sorted: None or [] is every dim (as torch's sum/amax/... read them)."""
    if value is None or value == []:
        return list(range(rank))
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(items, list | tuple) or not all(type(d) is int for d in items):
        raise NotSupported(f"dim={value!r} is not an int or int list")
    span = max(rank, 1)
    if any(not -span <= d < span for d in items):
        raise NotSupported(f"dim={value!r} out of range for rank {rank}")
    out = sorted({d % span for d in items} if rank else set())
    if len(out) != len(items) and rank:
        raise NotSupported(f"dim={value!r} repeats a dim")
    return out


def _dtype_ok(src: Operand, out: OutSpec, dtype: Any) -> None:
    """The result dtype: the input's, or a requested one that converting to loses nothing."""
    if out.dtype not in FLOATS:
        raise NotSupported(f"result dtype {out.dtype} is not supported")
    if dtype is None:
        if out.dtype != src.dtype:
            raise NotSupported(f"result dtype {out.dtype} differs from the input's {src.dtype}")
    elif dtype != out.dtype or not (dtype == src.dtype or dtype == "float32"):
        raise NotSupported(f"dtype={dtype} on a {src.dtype} input")


def _check_shape(spec: OutSpec, src: Operand, reduced: list[int]) -> None:
    """The result holds the kept dims in order (keepdim adds only ones)."""
    kept = [n for i, n in enumerate(src.shape) if i not in reduced and n != 1]
    if [n for n in spec.shape if n != 1] != kept:
        raise NotSupported(
            f"result shape {list(spec.shape)} does not match input {list(src.shape)} less dims {reduced}"
        )


# ---------------------------------------------------------------------------------------------
# Reductions


@dataclass(frozen=True)
class OpSpec:
    cpp: str  # the C++ op struct
    state_bytes: int
    p0: float = 0.0
    p1: float = 0.0
    second: str | None = None  # the second result: "int64" (indices) or "float" (var_mean's mean)


def _sum(pre: str = "ID", post: str = "ID", p0: float = 0.0, p1: float = 0.0) -> OpSpec:
    return OpSpec(f"sc_red_sum<SC_PRE_{pre}, SC_POST_{post}>", 4, p0, p1)


def _norm_spec(p: Any) -> OpSpec:
    """torch.linalg.vector_norm's ord as ATen's NormOps: 0, 1, 2, +-inf and any other p."""
    if p is None:
        p = 2.0
    if isinstance(p, bool) or not isinstance(p, int | float):
        raise NotSupported(f"ord={p!r}")
    if math.isnan(p):
        raise NotSupported("ord=nan")
    if p == math.inf:
        return OpSpec("sc_red_ext<true, true>", 4)
    if p == -math.inf:
        return OpSpec("sc_red_ext<false, true>", 4)
    if p == 0:
        return _sum("NZ")
    if p == 1:
        return _sum("ABS")
    if p == 2:
        return _sum("SQ", "SQRT")
    return _sum("POW", "ROOT", float(p), float(np.float32(1.0) / np.float32(p)))


def _correction(a: dict[str, Any]) -> float:
    if "correction" in a:
        c = a["correction"]
        c = 1 if c is None else c
    else:
        c = 1 if a.get("unbiased", True) else 0
    if isinstance(c, bool) or not isinstance(c, int | float):
        raise NotSupported(f"correction={c!r}")
    return float(c)


def _reduction(ctx: EmitContext, kind: str) -> Kernel:
    a = ctx.args
    src = _source(ctx)
    rank = len(src.shape)
    op = ctx.node["op"]
    target = ctx.node.get("target") or op
    if target in ("aten.max.other", "aten.min.other"):
        raise NotSupported(f"{target} is pointwise")
    reduced = _dims(a.get("dim"), rank)
    lay = _layout(src, reduced)
    numel = lay.n * lay.r
    outs = list(ctx.outputs)
    if kind in ("arg", "argonly"):
        spec = OpSpec(f"sc_red_arg<{'true' if op in ('max', 'argmax') else 'false'}>", 16, second="int64")
        if kind == "argonly":
            outs = [None, outs[0]]
        elif target.endswith(".default"):  # max.default / min.default: the value alone
            spec = OpSpec(f"sc_red_ext<{'true' if op == 'max' else 'false'}, false>", 4)
    elif kind == "ext":
        spec = OpSpec(f"sc_red_ext<{'true' if op == 'amax' else 'false'}, false>", 4)
    elif kind == "sum":
        spec = _sum("NAN0" if op == "nansum" else "ID")
    elif kind == "mean":
        spec = _sum("ID", "MUL", p1=float(np.float32(lay.n) / np.float32(numel)))
    elif kind == "prod":
        spec = OpSpec("sc_red_prod", 4)
    elif kind == "lse":
        spec = OpSpec("sc_red_lse", 8)
    elif kind == "norm":
        spec = _norm_spec(a.get("ord", a.get("p")))
    elif kind in ("var", "std"):
        std = "true" if kind == "std" else "false"
        spec = OpSpec(f"sc_red_welford<{std}>", 12, _correction(a), second="float" if len(outs) > 1 else None)
    else:
        raise AssertionError(kind)
    outs += [None] * (2 - len(outs))
    if outs[0] is None and outs[1] is None:
        raise NotSupported("no result is used")
    if len(ctx.outputs) > (2 if spec.second else 1):
        raise NotSupported(f"{len(ctx.outputs)} results")
    for k, spec_out in enumerate(outs):
        if spec_out is None:
            continue
        _check_shape(spec_out, src, reduced)
        if k == 1 and spec.second == "int64":
            if spec_out.dtype != "int64":
                raise NotSupported(f"indices dtype {spec_out.dtype}")
        else:
            _dtype_ok(src, spec_out, a.get("dtype"))
    if lay.r == 0 or lay.n == 0:
        raise NotSupported("empty reduction")
    note = f"{target} {list(src.shape)} dims {reduced}"
    return _reduce_kernel(ctx, src, lay, spec, outs, note)


def _short_tpr(r: int, vec: int) -> int:
    """Threads for a short row: about four vectors each, up to a warp (several rows share one)."""
    return min(32, 1 << max(0, math.ceil(math.log2(max(1, -(-r // (4 * vec)))))))


def _row_plan(lay: Layout, vec: int) -> tuple[int, int]:
    """(threads per row, splits) for the row kernel."""
    if lay.r <= 2048:
        return _short_tpr(lay.r, vec), 1
    tpr = 256 if lay.r <= 16384 else 512
    want = 2 * SMS * (2048 // tpr)  # groups that fill every SM twice over
    if 2 * lay.n >= want:
        return tpr, 1
    return tpr, max(1, min(-(-want // lay.n), lay.r // (16 * tpr), MAX_SPLITS))


def _col_plan(lay: Layout) -> int:
    want = SMS * 2048  # resident threads
    if 2 * lay.n >= want or lay.r < 64:
        return 1
    return max(1, min(-(-want // lay.n), lay.r // 32, MAX_SPLITS))


def _reduce_kernel(
    ctx: EmitContext, src: Operand, lay: Layout, spec: OpSpec, outs: list[OutSpec | None], note: str
) -> Kernel:
    name = ctx.name
    rows = lay.rows and lay.r >= 16
    if rows:
        vec = 16 // ITEM_SIZE[src.dtype] if lay.contig else 1
        tpr, splits = _row_plan(lay, vec)
    else:
        tpr, splits, vec = 1, _col_plan(lay), 1
    chunk = -(-lay.r // splits)
    chunk = -(-chunk // 16) * 16 if splits > 1 else chunk  # chunk starts keep the rows' alignment
    splits = -(-lay.r // chunk)
    ctype = C_TYPES[src.dtype]
    raw, casts, outputs = ["const void* in0_"], [f"  const auto x = static_cast<const {ctype}*>(in0_);"], []
    for spec_out, var in zip(outs, ("ya", "yb"), strict=True):
        if spec_out is None:
            casts.append(f"  float* const {var} = nullptr;")
            continue
        raw.append(f"void* out{len(outputs)}_")
        casts.append(f"  const auto {var} = static_cast<{C_TYPES[spec_out.dtype]}*>(out{len(outputs)}_);")
        outputs.append(KernelArg(spec_out.name, spec_out.dtype))
    scratch: list[tuple[str, int]] = []
    state = f"{name}_op::State"
    if splits > 1:
        raw.append("void* scratch0_")
        casts.append(f"  const auto part = static_cast<{state}*>(scratch0_);")
        scratch.append(("float32", lay.n * splits * spec.state_bytes // 4))
    else:
        casts.append(f"  {state}* const part = nullptr;")
    casts.append(f"  const {name}_op op{{{c_float(spec.p0)}, {c_float(spec.p1)}}};")
    args = f"op, x, ya, yb, part, {chunk}LL, {splits}LL"
    if rows:
        bs = max(tpr, BLOCK)
        blocks = -(-lay.n * splits // (bs // tpr))
        first = f"sc_red_rows<{name}_op, {name}_ix, {vec}, {tpr}>"
        launch = f"  {first}<<<{blocks}, {bs}, 0, stream>>>({args});"
        host = f"  sc_red_rows_host<{name}_op, {name}_ix, {vec}, {tpr}>({args});"
    else:
        blocks = -(-lay.n * splits // BLOCK)
        first = f"sc_red_cols<{name}_op, {name}_ix>"
        launch = f"  {first}<<<{blocks}, {BLOCK}, 0, stream>>>({args});"
        host = f"  sc_red_cols_host<{name}_op, {name}_ix>({args});"
    if splits > 1:
        fin = f"op, part, {lay.n}LL, {splits}LL, ya, yb"
        launch += f"\n  sc_red_final<<<{-(-lay.n // (BLOCK // 32))}, {BLOCK}, 0, stream>>>({fin});"
        host += f"\n  sc_red_final_host({fin});"
    plan = f"rows tpr {tpr} vec {vec}" if rows else "cols"
    note = f"{note}: {lay.n} x {lay.r}, {plan}" + (f", {splits} splits" if splits > 1 else "")
    source = f"""{_HEADER}
// {name}: {note}
using {name}_op = {spec.cpp};
{_ix_source(name, lay)}
{launchers(name, raw, casts, launch, host)}"""
    return Kernel(
        name=name,
        inputs=[KernelArg(src.name, src.dtype)],
        outputs=outputs,
        source=source,
        ops=[note],
        host=True,
        scratch=scratch,
    )


# ---------------------------------------------------------------------------------------------
# Softmax and scans: one dim, the result shaped as the input


def _along(ctx: EmitContext) -> tuple[Operand, OutSpec, Layout, int]:
    """Input, result, layout [outer, R, inner] and inner for an op along one dim."""
    src = _source(ctx)
    out = ctx.outputs[0] if len(ctx.outputs) == 1 else None
    if out is None:
        raise NotSupported("expected one result")
    if tuple(out.shape) != tuple(src.shape):
        raise NotSupported(f"result shape {list(out.shape)} differs from the input's {list(src.shape)}")
    rank = len(src.shape)
    dim = ctx.args.get("dim")
    if type(dim) is not int or not -max(rank, 1) <= dim < max(rank, 1):
        raise NotSupported(f"dim={dim!r}")
    if rank == 0:
        return src, out, Layout((), (), src.offset, 1, 1), 1
    dim %= rank
    dims = list(zip(src.shape, src.strides, strict=True))
    kept = _merge(dims[:dim] + dims[dim + 1 :])
    red = ((src.shape[dim], src.strides[dim]),)
    inner = math.prod(src.shape[dim + 1 :])
    return src, out, Layout(kept, red, src.offset, math.prod(n for n, _ in kept), src.shape[dim]), inner


def _along_kernel(
    ctx: EmitContext, src: Operand, out: OutSpec, lay: Layout, launch: str, host: str, note: str
) -> Kernel:
    name = ctx.name
    raw = ["const void* in0_", "void* out0_"]
    casts = [
        f"  const auto x = static_cast<const {C_TYPES[src.dtype]}*>(in0_);",
        f"  const auto y = static_cast<{C_TYPES[out.dtype]}*>(out0_);",
    ]
    loop = f"  for (int64_t o = 0; o < {name}_ix::N; ++o) {host};"
    source = f"""{_HEADER}
// {name}: {note}
{_ix_source(name, lay)}
{launchers(name, raw, casts, launch, loop)}"""
    return Kernel(
        name=name,
        inputs=[KernelArg(src.name, src.dtype)],
        outputs=[KernelArg(out.name, out.dtype)],
        source=source,
        ops=[note],
        host=True,
    )


def _vec_choice(lay: Layout, src: Operand, out: OutSpec, inner: int) -> int:
    """Vector width for rows whose starts are all aligned in the input and the result, else 1."""
    vec = min(16 // ITEM_SIZE[src.dtype], 16 // ITEM_SIZE[out.dtype])
    ok = inner == 1 and lay.contig and lay.r % vec == 0 and lay.aligned(vec)
    return vec if ok else 1


def _pick(vec: int, kernel: Callable[[int], str]) -> str:
    """A launch of kernel(vec) where both pointers are aligned at run time, else kernel(1)."""
    if vec == 1:
        return f"  {kernel(1)}"
    return f"  if (sc_aligned(x, {vec}) && sc_aligned(y, {vec}))\n    {kernel(vec)}\n  else\n    {kernel(1)}"


_SOFTMAX_MODES = {"_softmax": 0, "_log_softmax": 1, "_safe_softmax": 2}  # MODE of the CUDA templates


def _softmax(ctx: EmitContext, op: str) -> Kernel:
    src, out, lay, inner = _along(ctx)
    _floats(src, out)
    name, flag = ctx.name, str(_SOFTMAX_MODES[op])
    rows = inner == 1 and lay.contig and lay.r >= 8
    note = f"{ctx.node.get('target')} {list(src.shape)} dim {ctx.args.get('dim')}: {lay.n} x {lay.r}"
    host = f"sc_softmax_col<{name}_ix, {flag}, {inner}LL>(x, y, o)"
    if not rows:
        blocks = -(-lay.n // BLOCK)
        launch = f"  sc_softmax_cols<{name}_ix, {flag}, {inner}LL><<<{blocks}, {BLOCK}, 0, stream>>>(x, y);"
        return _along_kernel(ctx, src, out, lay, launch, host, note + ", cols")
    vec = _vec_choice(lay, src, out, inner)
    cached = next((t for t, cap in ((32, 32), (256, 32), (512, 32)) if lay.r <= t * cap), None)
    cached = _short_tpr(lay.r, vec) if cached == 32 else cached
    tpr = cached or 512
    bs = max(tpr, BLOCK)
    grid = f"<<<{-(-lay.n // (bs // tpr))}, {bs}, 0, stream>>>(x, y);"
    if cached:

        def kernel(v: int) -> str:
            return f"sc_softmax_rows_reg<{name}_ix, {flag}, {v}, {tpr}, {-(-lay.r // (tpr * v))}>{grid}"

        note += f", rows in registers tpr {tpr} vec {vec}"
    else:
        load = 16 // ITEM_SIZE[src.dtype]

        def kernel(v: int) -> str:
            return f"sc_softmax_rows<{name}_ix, {flag}, {load}, {v}, {tpr}>{grid}"

        note += f", rows two passes tpr {tpr} vec {vec}"
    return _along_kernel(ctx, src, out, lay, _pick(vec, kernel), host, note)


def _floats(src: Operand, out: OutSpec) -> None:
    if out.dtype not in FLOATS:
        raise NotSupported(f"result dtype {out.dtype} is not supported")


def torch_scan_chunk(rows: int, size: int) -> int:
    """The chunk (2 * num_threads_x) of ATen's CUDA scan along the innermost dim, for `rows` rows of
    `size`: get_log_num_threads_x_inner_scan in its uint32 arithmetic, wrap-around included (many
    short rows get the largest chunk)."""
    lx = max(0, (size - 1).bit_length())
    ly = max(0, (rows - 1).bit_length())
    log_x = ((9 + lx - ly) % 2**32) // 2
    return 2 << min(max(4, log_x), 9)


def _scan(ctx: EmitContext, prod: bool) -> Kernel:
    src, out, lay, inner = _along(ctx)
    _dtype_ok(src, out, ctx.args.get("dtype"))
    name, flag = ctx.name, "true" if prod else "false"
    rows = inner == 1 and lay.contig and lay.r >= 8
    note = f"{ctx.node.get('target')} {list(src.shape)} dim {ctx.args.get('dim')}: {lay.n} x {lay.r}"
    host = f"sc_scan_col<{name}_ix, {flag}, {inner}LL>(x, y, o)"
    if prod and inner == 1:
        # A row within one chunk gets the same products from any chunk that holds it.
        c = min(torch_scan_chunk(lay.n, lay.r), max(32, 1 << (lay.r - 1).bit_length()))
        u = max(1, 256 // c)
        grid = f"<<<{-(-lay.n // (max(c, BLOCK) // c))}, {max(c, BLOCK)}, 0, stream>>>(x, y);"
        launch = f"  sc_cumprod_rows<{name}_ix, {c}, {u}>{grid}"
        host = f"sc_cumprod_row_host<{name}_ix, {c}>(x, y, o)"
        return _along_kernel(ctx, src, out, lay, launch, host, note + f", rows in torch's chunks of {c}")
    if not rows:
        blocks = -(-lay.n // BLOCK)
        launch = f"  sc_scan_cols<{name}_ix, {flag}, {inner}LL><<<{blocks}, {BLOCK}, 0, stream>>>(x, y);"
        return _along_kernel(ctx, src, out, lay, launch, host, note + ", cols")
    vec = _vec_choice(lay, src, out, inner)
    tpr = _short_tpr(lay.r, vec) if lay.r <= 256 else 256 if lay.r <= 4096 else 512
    bs = max(tpr, BLOCK)
    grid = f"<<<{-(-lay.n // (bs // tpr))}, {bs}, 0, stream>>>(x, y);"

    def kernel(v: int) -> str:
        return f"sc_scan_rows<{name}_ix, {flag}, {v}, {tpr}>{grid}"

    note += f", rows tpr {tpr} vec {vec}"
    return _along_kernel(ctx, src, out, lay, _pick(vec, kernel), host, note)


# ---------------------------------------------------------------------------------------------

Emitter = Callable[[EmitContext], Kernel]

EMITTERS: dict[str, Emitter] = {
    "sum": partial(_reduction, kind="sum"),
    "nansum": partial(_reduction, kind="sum"),
    "mean": partial(_reduction, kind="mean"),
    "prod": partial(_reduction, kind="prod"),
    "amax": partial(_reduction, kind="ext"),
    "amin": partial(_reduction, kind="ext"),
    "max": partial(_reduction, kind="arg"),
    "min": partial(_reduction, kind="arg"),
    "argmax": partial(_reduction, kind="argonly"),
    "argmin": partial(_reduction, kind="argonly"),
    "logsumexp": partial(_reduction, kind="lse"),
    "var": partial(_reduction, kind="var"),
    "std": partial(_reduction, kind="std"),
    "var_mean": partial(_reduction, kind="var"),
    "std_mean": partial(_reduction, kind="std"),
    "linalg_vector_norm": partial(_reduction, kind="norm"),
    "norm": partial(_reduction, kind="norm"),
    "_softmax": partial(_softmax, op="_softmax"),
    "_log_softmax": partial(_softmax, op="_log_softmax"),
    "_safe_softmax": partial(_softmax, op="_safe_softmax"),
    "cumsum": partial(_scan, prod=False),
    "cumprod": partial(_scan, prod=True),
}
