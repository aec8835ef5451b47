//! Shared by every reduction, softmax and scan kernel of a .cu (emit_reduce.py): op structs, the
//! per-thread part, group merges, and the row / column / final kernels.

#ifndef SC_REDUCE_H
#define SC_REDUCE_H

// Vectors a thread loads before it reduces any of them, in the row loops below: one load at a time
// left a softmax's passes over 1 GB rows at 1.55 TB/s, where Triton's reach 4 (level 2's 38,
// 2026-12-01). The order each thread meets its elements in, so every result, stays the same.
#ifndef SC_RED_U
#define SC_RED_U @RED_U@
#endif
// Scalar loads a thread has in flight before it reduces any of them, where the reduced elements are
// strided (a column reduction: a thread an output, walking down its column) or not aligned to
// vectors: four vectors of 16 bytes are in flight per thread on the row paths above, so a scalar
// path needs more loads for as many bytes. Same order of elements, so the same results.
#ifndef SC_RED_US
#define SC_RED_US @RED_US@
#endif
// 1: logsumexp's state takes a vector at a time (sc_red_lse::add_vec), one max and one rescale a vector
// instead of a compare and branch an element.
#ifndef SC_RED_LSE_VEC
#define SC_RED_LSE_VEC @LSE_VEC@
#endif
// Reductions, softmax and scans (emit_reduce.py): fp32 math over fp32/fp16/bf16 storage.
#define SC_RED_BLOCK 256
// The prelude's sc_grid sizes the elementwise passes; a .cu whose only kernel is a softmax that
// stores its epilogue's result has none (as norm.cuh says for the fused norms).
[[maybe_unused]] static unsigned (*const sc_red_grid)(int64_t) = &sc_grid;

SC_INLINE bool sc_finite(float x) { return fabsf(x) < INFINITY; }
template <class T> SC_INLINE void sc_red_put(T* p, float v) { *p = sc_from_f<T>(v); }
SC_INLINE void sc_red_put(int64_t* p, int64_t v) { *p = v; }

// Sum family: PRE maps each element, POST the total (means, norms). A, the accumulator: the
// reductions emit_reduce writes sum in double, since an fp32 running sum over millions of elements
// that cancel (level1/98's KL divergence on the shared-lines set, the H200, 2026-12-03) was five times
// further from the exact sum than torch's own fp32 result; one double add an element is far below
// the memory traffic's cost. A softmax's denominators (positive terms, one row) stay in float.
enum { SC_PRE_ID, SC_PRE_ABS, SC_PRE_SQ, SC_PRE_NZ, SC_PRE_POW, SC_PRE_NAN0 };
enum { SC_POST_ID, SC_POST_MUL, SC_POST_SQRT, SC_POST_ROOT };
template <int PRE, int POST, class A = float>
struct sc_red_sum {
  float p0, p1;  // p0: exponent of PRE_POW; p1: factor of POST_MUL, 1/p of POST_ROOT
  struct State { A s; };
  SC_INLINE State init() const { return {A(0)}; }
  SC_INLINE void add(State& a, float x, int64_t) const {
    if (PRE == SC_PRE_ABS) x = fabsf(x);
    if (PRE == SC_PRE_SQ) x = x * x;
    if (PRE == SC_PRE_NZ) x = x != 0.0f ? 1.0f : 0.0f;
    if (PRE == SC_PRE_POW) x = powf(fabsf(x), p0);
    if (PRE == SC_PRE_NAN0) x = x != x ? 0.0f : x;
    a.s += A(x);
  }
  SC_INLINE void merge(State& a, const State& b) const { a.s += b.s; }
  SC_INLINE float value(const State& a) const {
    if (POST == SC_POST_MUL) return float(a.s * A(p1));
    if (POST == SC_POST_SQRT) return float(sqrt(a.s));
    if (POST == SC_POST_ROOT) return float(pow(a.s, A(p1)));
    return float(a.s);
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

// x - m of a value and a running max, never fused with the product that made x: nvcc contracts
// `v * scale - m` into one FMA, which subtracts m from the unrounded product. A softmax's first pass
// counts its max as exactly 1 and its second pass then made exp(product's rounding error) of it:
// at large scores (x1e3 inputs, scores ~1e6) that is a few percent (bench/coverage's einsum attention
// on the H200, 2026-11-30). __fsub_rn is never merged into an FMA.
SC_INLINE float sc_sub_rn(float x, float m) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(x, m);
#else
  return x - m;
#endif
}

// logsumexp: running max m and s = sum exp(x - m). Non-finite maxima give what ATen's
// logsumexp gives (it computes with the max replaced by 0 there): +inf, -inf or NaN.
struct sc_red_lse {
  float p0, p1;
  struct State { float m, s; };
  SC_INLINE State init() const { return {-INFINITY, 0.0f}; }
  SC_INLINE void add(State& a, float x, int64_t) const {
    if (x > a.m) { a.s = a.s * expf(sc_sub_rn(a.m, x)) + 1.0f; a.m = x; }
    else if (x != x) a.m = x;
    else if (sc_finite(a.m)) a.s += expf(sc_sub_rn(x, a.m));
  }
  SC_INLINE void merge(State& a, const State& b) const {
    if (a.m != a.m || b.m != b.m) { a.m = a.m + b.m; return; }
    const float m = fmaxf(a.m, b.m);
    if (sc_finite(m)) a.s = a.s * expf(sc_sub_rn(a.m, m)) + b.s * expf(sc_sub_rn(b.m, m));
    a.m = m;
  }
  // VEC elements at once where they and the state are ordinary (finite, no NaN): the new max, the
  // sum rescaled once to it and every element's exp added. Anything else takes add's element-wise
  // rules (infinities and NaN as ATen gives them).
  template <int VEC> SC_INLINE void add_vec(State& a, const float (&x)[VEC]) const {
    float mx = a.m;
    bool nan = a.m != a.m;
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      mx = fmaxf(mx, x[l]);
      nan |= x[l] != x[l];
    }
    if (nan || !sc_finite(mx)) {
#pragma unroll
      for (int l = 0; l < VEC; ++l) add(a, x[l], 0);
      return;
    }
    float s = a.s * expf(sc_sub_rn(a.m, mx));
#pragma unroll
    for (int l = 0; l < VEC; ++l) s += expf(sc_sub_rn(x[l], mx));
    a.s = s;
    a.m = mx;
  }
  SC_INLINE float value(const State& a) const { return sc_finite(a.m) ? a.m + logf(a.s) : a.m; }
  SC_INLINE float second(const State&) const { return 0.0f; }
};

// Two reductions over the same rows in one pass (emit_reduce's sibling pair: a triplet loss's two
// distances both read the anchor): the loader gives both elements at once, A's result goes to ya
// and B's to yb, so the row, split and final kernels serve a pair as they do one op.
struct sc_red_f2 { float a, b; };
template <class A, class B>
struct sc_red_pair {
  A a;
  B b;
  struct State { typename A::State a; typename B::State b; };
  SC_INLINE State init() const { return {a.init(), b.init()}; }
  SC_INLINE void add(State& s, sc_red_f2 x, int64_t r) const { a.add(s.a, x.a, r); b.add(s.b, x.b, r); }
  SC_INLINE void merge(State& s, const State& o) const { a.merge(s.a, o.a); b.merge(s.b, o.b); }
  SC_INLINE float value(const State& s) const { return a.value(s.a); }
  SC_INLINE float second(const State& s) const { return b.value(s.b); }
};

// VEC consecutive elements r0 .. r0 + VEC - 1 into a state: one at a time, as add takes them (V: a
// float, or sc_red_f2 for two sibling reductions' elements)...
template <class Op, int VEC, class V>
SC_INLINE void sc_red_add_vec(const Op& op, typename Op::State& st, const V (&x)[VEC], int64_t r0) {
#pragma unroll
  for (int l = 0; l < VEC; ++l) op.add(st, x[l], r0 + l);
}
// ...or, for logsumexp, a vector at a time.
template <int VEC>
SC_INLINE void sc_red_add_vec(const sc_red_lse& op, sc_red_lse::State& st, const float (&x)[VEC], int64_t r0) {
#if SC_RED_LSE_VEC
  (void)r0;
  op.template add_vec<VEC>(st, x);
#else
#pragma unroll
  for (int l = 0; l < VEC; ++l) op.add(st, x[l], r0 + l);
#endif
}

// Elements r, r + step, ... below hi of a strided operand into st, U loads in flight before any is
// reduced (the same order of elements whatever U, so the same result).
template <int U, class Ix, class Op, class T>
SC_INLINE void sc_red_strided(const Op& op, typename Op::State& st, const T* __restrict__ row, int64_t r, int64_t hi,
                              int64_t step) {
  for (; r + (U - 1) * step < hi; r += U * step) {
    T c[U];
#pragma unroll
    for (int u = 0; u < U; ++u) c[u] = row[Ix::off(r + u * step)];
#pragma unroll
    for (int u = 0; u < U; ++u) op.add(st, sc_to_f(c[u]), r + u * step);
  }
  for (; r < hi; r += step) op.add(st, sc_to_f(row[Ix::off(r)]), r);
}

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
    int64_t k = t;
    for (; k + (SC_RED_U - 1) * (int64_t)tpr < nv; k += SC_RED_U * (int64_t)tpr) {
      sc_vec<T, VEC> c[SC_RED_U];
#pragma unroll
      for (int u = 0; u < SC_RED_U; ++u) c[u] = v[k + u * (int64_t)tpr];
#pragma unroll
      for (int u = 0; u < SC_RED_U; ++u) {
        float f[VEC];
#pragma unroll
        for (int l = 0; l < VEC; ++l) f[l] = sc_to_f(c[u].v[l]);
        sc_red_add_vec(op, st, f, start + (k + u * (int64_t)tpr) * VEC);
      }
    }
    for (; k < nv; k += tpr) {
      const sc_vec<T, VEC> c = v[k];
      float f[VEC];
#pragma unroll
      for (int l = 0; l < VEC; ++l) f[l] = sc_to_f(c.v[l]);
      sc_red_add_vec(op, st, f, start + k * VEC);
    }
    for (int64_t r = start + nv * VEC + t; r < hi; r += tpr) op.add(st, sc_to_f(row[r]), r);
  } else {
    sc_red_strided<SC_RED_US, Ix>(op, st, row, lo + t, hi, tpr);
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

// Columns as tiles (emit_reduce's tile plan, STITCHCUDA_RED_TILE): ATen's shape for a reduction off
// the fastest dimension. A block is 32 x CW neighbouring columns (a warp across, each thread CW
// columns 32 apart) by BY warps; warp ty walks rows ty, ty + BY, ... keeping VT states a column, so
// CW x VT loads are in flight before any is reduced; the VT states, then the warps' states (shared
// memory), are merged. A batch of [B, R, I] then takes I / (32 CW) blocks where the thread-a-column
// kernel takes I / 256, so the blocks in flight read a few batches instead of dozens (level 1's 47-53
// on an H100: the thread-a-column kernel at 75% of the DRAM bandwidth, ATen's tiles at 87%, and
// 16 warps x 2 states x 2 columns at 91% in scripts/probe_col_reduce.py).
// Thread (b, tx, ty)'s part: the states of its CW columns (flat outputs g_c = (b * CW + c) * 32 + tx
// over N x splits) over their rows from ty in steps of BY. The kernel and the host entry (every
// thread's part in turn, the warps merged in the same order) run this same function, so they agree
// bit for bit whatever order the states are merged in.
template <class Op, class Ix, int BY, int VT, int CW, class T>
SC_INLINE void sc_red_tile_part(const Op& op, const T* __restrict__ x, int64_t b, int tx, int ty, int64_t chunk,
                                int64_t splits, typename Op::State (&out)[CW]) {
  using S = typename Op::State;
  S st[CW][VT];
#pragma unroll
  for (int c = 0; c < CW; ++c)
#pragma unroll
    for (int v = 0; v < VT; ++v) st[c][v] = op.init();
  const int64_t g0 = b * CW * 32 + tx, last = g0 + (CW - 1) * 32;
  int64_t k = ty;
  // Every column of the thread live and in the same split (all but a few threads at the ends): one
  // row range and one row offset for all, so the registers stay few and the blocks many (a pointer
  // and a range a column took 50-107 registers a thread).
  if (last < Ix::N * splits && g0 / Ix::N == last / Ix::N) {
    const int64_t lo = g0 / Ix::N * chunk, n = (lo + chunk < Ix::R ? lo + chunk : Ix::R) - lo;
    const T* rowp[CW];
#pragma unroll
    for (int c = 0; c < CW; ++c) rowp[c] = x + Ix::base((g0 + 32 * c) % Ix::N);
    for (; k + (VT - 1) * BY < n; k += VT * BY) {
      T e[CW][VT];
#pragma unroll
      for (int v = 0; v < VT; ++v) {
        const int64_t at = Ix::off(lo + k + v * BY);
#pragma unroll
        for (int c = 0; c < CW; ++c) e[c][v] = rowp[c][at];
      }
#pragma unroll
      for (int c = 0; c < CW; ++c)
#pragma unroll
        for (int v = 0; v < VT; ++v) op.add(st[c][v], sc_to_f(e[c][v]), lo + k + v * BY);
    }
  }
  // The rest: the fast loop's tail, or every row of a thread whose columns differ in range.
#pragma unroll
  for (int c = 0; c < CW; ++c) {
    const int64_t g = g0 + 32 * c;
    if (g < Ix::N * splits) {
      const int64_t lo = g / Ix::N * chunk, n = (lo + chunk < Ix::R ? lo + chunk : Ix::R) - lo;
      const T* row = x + Ix::base(g % Ix::N);
      for (int64_t r = k; r < n; r += BY) op.add(st[c][0], sc_to_f(row[Ix::off(lo + r)]), lo + r);
    }
#pragma unroll
    for (int v = 1; v < VT; ++v) op.merge(st[c][0], st[c][v]);
    out[c] = st[c][0];
  }
}

// MINB blocks an SM: registers capped so that many fit. emit_reduce asks for 2,048 threads (a full
// H100 SM) where the states are small, as the blocks in flight are what keeps enough loads in flight
// to reach the DRAM bandwidth; for larger states (argmax's value and index) the cap spilled, and no
// cap ran faster (bench/results/2026-12-06-h100-l1-col-tiles-291a6c1-a965c28.md).
template <class Op, class Ix, int BY, int VT, int CW, int MINB, class T, class TA, class TB>
__global__ void __launch_bounds__(32 * BY, MINB)
sc_red_tile(const Op op, const T* __restrict__ x, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
            int64_t splits) {
  using S = typename Op::State;
  __shared__ S buf[BY][CW][32];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  S st[CW];
  sc_red_tile_part<Op, Ix, BY, VT, CW>(op, x, (int64_t)blockIdx.x, tx, ty, chunk, splits, st);
#pragma unroll
  for (int c = 0; c < CW; ++c) buf[ty][c][tx] = st[c];
  __syncthreads();
  if (ty == 0) {
#pragma unroll
    for (int c = 0; c < CW; ++c) {
      const int64_t g = ((int64_t)blockIdx.x * CW + c) * 32 + tx;
      if (g >= Ix::N * splits) continue;
#pragma unroll
      for (int k = 1; k < BY; ++k) op.merge(st[c], buf[k][c][tx]);
      sc_red_store(op, st[c], g % Ix::N, g / Ix::N, splits, ya, yb, part);
    }
  }
}

template <class Op, class Ix, int BY, int VT, int CW, class T, class TA, class TB>
static void sc_red_tile_host(const Op op, const T* x, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
                             int64_t splits) {
  using S = typename Op::State;
  const int64_t blocks = (Ix::N * splits + 32 * CW - 1) / (32 * CW);
  for (int64_t b = 0; b < blocks; ++b)
    for (int tx = 0; tx < 32; ++tx) {
      S st[CW], more[CW];
      sc_red_tile_part<Op, Ix, BY, VT, CW>(op, x, b, tx, 0, chunk, splits, st);
      for (int ty = 1; ty < BY; ++ty) {
        sc_red_tile_part<Op, Ix, BY, VT, CW>(op, x, b, tx, ty, chunk, splits, more);
        for (int c = 0; c < CW; ++c) op.merge(st[c], more[c]);
      }
      for (int c = 0; c < CW; ++c) {
        const int64_t g = (b * CW + c) * 32 + tx;
        if (g < Ix::N * splits) sc_red_store(op, st[c], g % Ix::N, g / Ix::N, splits, ya, yb, part);
      }
    }
}

// Columns as strips (emit_reduce's strips plan, STITCHCUDA_RED_STRIPS=1): the operand is [outer, R,
// inner], inner contiguous, and block (b, s) reduces rows [s * chunk, +chunk) of batch b for every
// column at once, thread t keeping the states of columns t + k * SC_RED_BLOCK (K of them). A block so
// reads whole rows, each one contiguous run, with K loads a thread in flight; the thread-per-column
// kernel above reads a 1 KiB piece of a row a block and has one load in flight, which held level 1's
// column sums, means and extrema at 72% of an H100's DRAM bandwidth (eager's ATen kernel: 77-81%).
// Thread t of block g: its K columns' states over the block's rows, stored. The kernel and the host
// entry (every block's every thread in turn) run this same function.
template <class Op, int K, class T, class TA, class TB>
SC_INLINE void sc_red_strip(const Op& op, const T* __restrict__ x, TA* ya, TB* yb, typename Op::State* part, int64_t R,
                            int64_t inner, int64_t chunk, int64_t splits, int64_t g, int t) {
  const int64_t b = g / splits, s = g % splits, lo = s * chunk;
  const int64_t hi = lo + chunk < R ? lo + chunk : R;
  typename Op::State st[K];
#pragma unroll
  for (int k = 0; k < K; ++k) st[k] = op.init();
  const T* row = x + (b * R + lo) * inner;
  for (int64_t r = lo; r < hi; ++r, row += inner) {
    T c[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t i = t + k * SC_RED_BLOCK;
      if (i < inner) c[k] = row[i];
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (t + k * SC_RED_BLOCK < inner) op.add(st[k], sc_to_f(c[k]), r);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = t + k * SC_RED_BLOCK;
    if (i < inner) sc_red_store(op, st[k], b * inner + i, s, splits, ya, yb, part);
  }
}

template <class Op, int K, class T, class TA, class TB>
__global__ void __launch_bounds__(SC_RED_BLOCK)
sc_red_strips(const Op op, const T* __restrict__ x, TA* ya, TB* yb, typename Op::State* part, int64_t R,
              int64_t inner, int64_t chunk, int64_t splits) {
  sc_red_strip<Op, K>(op, x, ya, yb, part, R, inner, chunk, splits, (int64_t)blockIdx.x, (int)threadIdx.x);
}

template <class Op, int K, class T, class TA, class TB>
static void sc_red_strips_host(const Op op, const T* x, TA* ya, TB* yb, typename Op::State* part, int64_t outer,
                               int64_t R, int64_t inner, int64_t chunk, int64_t splits) {
  for (int64_t g = 0; g < outer * splits; ++g)
    for (int t = 0; t < SC_RED_BLOCK; ++t) sc_red_strip<Op, K>(op, x, ya, yb, part, R, inner, chunk, splits, g, t);
}

// With a prologue (emit_reduce, `Prologue`): the reduced operand is never stored; `ld(e)` computes
// its row-major element e from the pointwise ops' own inputs as it is read. Scalar reads (the
// operand has no memory to take vectors of); the rows, columns and splits are the plain kernels'.
template <class Op, class Ix, class Ld>
SC_INLINE typename Op::State sc_red_part_ld(const Op& op, const Ld& ld, int64_t o, int64_t lo, int64_t hi, int t,
                                            int tpr) {
  typename Op::State st = op.init();
  const int64_t b = Ix::base(o);
  int64_t r = lo + t;
  for (; r + (SC_RED_US - 1) * (int64_t)tpr < hi; r += SC_RED_US * (int64_t)tpr) {
    decltype(ld(int64_t(0))) c[SC_RED_US];  // float, or sc_red_f2 for a pair's loader
#pragma unroll
    for (int u = 0; u < SC_RED_US; ++u) c[u] = ld(b + Ix::off(r + u * (int64_t)tpr));
#pragma unroll
    for (int u = 0; u < SC_RED_US; ++u) op.add(st, c[u], r + u * (int64_t)tpr);
  }
  for (; r < hi; r += tpr) op.add(st, ld(b + Ix::off(r)), r);
  return st;
}

// Contiguous rows (Ix::off(r) == r) through a loader whose vector inputs are VEC-aligned (asked on
// the host, ld.aligned): a scalar head up to a multiple of VEC elements, vectors of the loader's
// `vec` (each input read at the element itself as one vector load), a scalar tail; each thread
// meets its elements in increasing r, as sc_red_part's vector path does.
template <class Op, class Ix, int VEC, class Ld>
SC_INLINE typename Op::State sc_red_part_ldv(const Op& op, const Ld& ld, int64_t o, int64_t lo, int64_t hi, int t,
                                             int tpr) {
  if constexpr (VEC == 1) {
    return sc_red_part_ld<Op, Ix>(op, ld, o, lo, hi, t, tpr);
  } else {
    typename Op::State st = op.init();
    const int64_t b = Ix::base(o);
    int64_t head = (b + lo) % VEC;
    head = head ? VEC - head : 0;
    if (head > hi - lo) head = hi - lo;
    for (int64_t r = lo + t; r < lo + head; r += tpr) op.add(st, ld(b + r), r);
    const int64_t start = lo + head, nv = (hi - start) / VEC;
    int64_t k = t;
    for (; k + (SC_RED_U - 1) * (int64_t)tpr < nv; k += SC_RED_U * (int64_t)tpr) {
      decltype(ld.template vec<VEC>(0)) c[SC_RED_U];
#pragma unroll
      for (int u = 0; u < SC_RED_U; ++u) c[u] = ld.template vec<VEC>(b + start + (k + u * (int64_t)tpr) * VEC);
#pragma unroll
      for (int u = 0; u < SC_RED_U; ++u) sc_red_add_vec(op, st, c[u].v, start + (k + u * (int64_t)tpr) * VEC);
    }
    for (; k < nv; k += tpr) {
      const auto c = ld.template vec<VEC>(b + start + k * VEC);
      sc_red_add_vec(op, st, c.v, start + k * VEC);
    }
    for (int64_t r = start + nv * VEC + t; r < hi; r += tpr) op.add(st, ld(b + r), r);
    return st;
  }
}

template <class Op, class Ix, int TPR, int VEC = 1, class Ld, class TA, class TB>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_red_rows_ld(const Op op, const Ld ld, TA* ya, TB* yb, typename Op::State* part, int64_t chunk, int64_t splits) {
  constexpr int BS = TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR;
  const int64_t g = sc_red_group<TPR, BS>(Ix::N * splits);
  if (g < 0) return;
  const int t = threadIdx.x % TPR;
  const int64_t o = g / splits, s = g % splits, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
  const auto st = sc_red_all<TPR>(op, sc_red_part_ldv<Op, Ix, VEC>(op, ld, o, lo, hi, t, TPR));
  if (t == 0 && SC_RED_LIVE(Ix::N * splits)) sc_red_store(op, st, o, s, splits, ya, yb, part);
}

template <class Op, class Ix, int TPR, int VEC = 1, class Ld, class TA, class TB>
static void sc_red_rows_ld_host(const Op op, const Ld ld, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
                                int64_t splits) {
  for (int64_t g = 0; g < Ix::N * splits; ++g) {
    const int64_t o = g / splits, s = g % splits, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
    auto st = op.init();
    for (int t = 0; t < TPR; ++t) op.merge(st, sc_red_part_ldv<Op, Ix, VEC>(op, ld, o, lo, hi, t, TPR));
    sc_red_store(op, st, o, s, splits, ya, yb, part);
  }
}

template <class Op, class Ix, class Ld, class TA, class TB>
__global__ void __launch_bounds__(SC_RED_BLOCK)
sc_red_cols_ld(const Op op, const Ld ld, TA* ya, TB* yb, typename Op::State* part, int64_t chunk, int64_t splits) {
  const int64_t g = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (g >= Ix::N * splits) return;
  const int64_t o = g % Ix::N, s = g / Ix::N, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
  sc_red_store(op, sc_red_part_ld<Op, Ix>(op, ld, o, lo, hi, 0, 1), o, s, splits, ya, yb, part);
}

template <class Op, class Ix, class Ld, class TA, class TB>
static void sc_red_cols_ld_host(const Op op, const Ld ld, TA* ya, TB* yb, typename Op::State* part, int64_t chunk,
                                int64_t splits) {
  for (int64_t g = 0; g < Ix::N * splits; ++g) {
    const int64_t o = g % Ix::N, s = g / Ix::N, lo = s * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
    sc_red_store(op, sc_red_part_ld<Op, Ix>(op, ld, o, lo, hi, 0, 1), o, s, splits, ya, yb, part);
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
  if (MODE == SC_SOFTMAX_LOG) return sc_sub_rn(x, m) - d;
  if (MODE == SC_SOFTMAX_SAFE && m == -INFINITY) return 0.0f;
  return expf(sc_sub_rn(x, m)) / d;
}

// The divisor from an online state: NaN where the max is not finite, as ATen's softmax gets there.
template <int MODE>
SC_INLINE float sc_softmax_div(const sc_red_lse::State& st) {
  if (MODE == SC_SOFTMAX_SAFE && st.m == -INFINITY) return 1.0f;  // unused: the row is all zeros
  return sc_finite(st.m) ? (MODE == SC_SOFTMAX_LOG ? logf(st.s) : st.s) : NAN;
}

// What a softmax stores of its value v at element e of its result: v itself, or an epilogue's
// functor (emit_reduce: the pointwise ops after the softmax, computed as it stores, their end stored).
struct sc_red_no_ep {
  SC_INLINE float operator()(int64_t, float v) const { return v; }
  template <int VEC> SC_INLINE sc_vec<float, VEC> vec(int64_t, const sc_vec<float, VEC>& v) const { return v; }
};

// The epilogue over VEC results at y's elements base .. base + VEC - 1 (base a multiple of VEC, as
// a vector store there needs), rounded to TO: through the epilogue's vector form, which works out
// once a vector what its lanes share (codegen.Epilogue.vec).
template <int VEC, class TO, class Ep>
SC_INLINE sc_vec<TO, VEC> sc_red_ep_vec(const Ep& ep, int64_t base, const sc_vec<float, VEC>& x) {
  const sc_vec<float, VEC> e = ep.template vec<VEC>(base, x);
  sc_vec<TO, VEC> o;
#pragma unroll
  for (int l = 0; l < VEC; ++l) o.v[l] = sc_from_f<TO>(e.v[l]);
  return o;
}

// One row (output o of the layout) serially: the column kernel, and every host entry.
template <class Ix, int MODE, int64_t INNER, class T, class TO, class Ep = sc_red_no_ep>
SC_INLINE void sc_softmax_col(const T* __restrict__ x, TO* __restrict__ y, int64_t o, const Ep& ep = Ep{}) {
  const sc_red_lse op{0.0f, 0.0f};
  const auto st = sc_red_part<sc_red_lse, Ix, 1>(op, x, o, 0, Ix::R, 0, 1);
  const float d = sc_softmax_div<MODE>(st);
  const T* row = x + Ix::base(o);
  const int64_t e0 = (o / INNER) * Ix::R * INNER + o % INNER;
  for (int64_t r = 0; r < Ix::R; ++r)
    y[e0 + r * INNER] = sc_from_f<TO>(ep(e0 + r * INNER, sc_softmax_out<MODE>(sc_to_f(row[Ix::off(r)]), st.m, d)));
}

template <class Ix, int MODE, int64_t INNER, class T, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(SC_RED_BLOCK) sc_softmax_cols(const T* __restrict__ x, TO* __restrict__ y, const Ep ep = Ep{}) {
  const int64_t o = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (o < Ix::N) sc_softmax_col<Ix, MODE, INNER>(x, y, o, ep);
}

// sc_softmax_cols_split's meeting of its warps' slices: each warp's (max, sum) pair for its lane's
// column merged with the others', every warp getting the column's whole.
template <int WARPS>
__device__ __forceinline__ sc_red_lse::State sc_merge_warp_slices(const sc_red_lse& op, sc_red_lse::State st) {
  __shared__ float part_m[WARPS][32], part_s[WARPS][32];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  part_m[w][lane] = st.m;
  part_s[w][lane] = st.s;
  __syncthreads();
  auto all = op.init();
#pragma unroll
  for (int k = 0; k < WARPS; ++k) op.merge(all, sc_red_lse::State{part_m[k][lane], part_s[k][lane]});
  return all;
}

// Columns split over warps: a block takes 32 neighbouring outputs (coalesced where INNER is a
// multiple of 32: channels-last storage's softmax over W, threads along C), each of its WARPS warps a
// slice of the rows; their (max, sum) pairs meet in shared memory, then each warp writes its slice,
// re-read from L2. A thread a whole column (sc_softmax_cols) left 128 blocks of 2 x 512 serial loads
// for 32,768 columns of 512.
template <class Ix, int MODE, int64_t INNER, int WARPS, class T, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(32 * WARPS)
sc_softmax_cols_split(const T* __restrict__ x, TO* __restrict__ y, const Ep ep = Ep{}) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t o = (int64_t)blockIdx.x * 32 + lane;
  const bool live = o < Ix::N;
  const sc_red_lse op{0.0f, 0.0f};
  const int64_t chunk = (Ix::R + WARPS - 1) / WARPS, lo = w * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
  auto st = op.init();
  if (live && lo < hi) st = sc_red_part<sc_red_lse, Ix, 1>(op, x, o, lo, hi, 0, 1);
  const auto all = sc_merge_warp_slices<WARPS>(op, st);
  if (!live) return;
  const float d = sc_softmax_div<MODE>(all);
  const T* row = x + Ix::base(o);
  const int64_t e0 = (o / INNER) * Ix::R * INNER + o % INNER;
  for (int64_t r = lo; r < hi; ++r)
    y[e0 + r * INNER] = sc_from_f<TO>(ep(e0 + r * INNER, sc_softmax_out<MODE>(sc_to_f(row[Ix::off(r)]), all.m, d)));
}

// A row that fits in registers: ITEMS chunks of VEC elements per thread, read once.
template <class Ix, int MODE, int VEC, int TPR, int ITEMS, class T, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_softmax_rows_reg(const T* __restrict__ x, TO* __restrict__ y, const Ep ep = Ep{}) {
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
    for (int l = 0; l < VEC; ++l) sm.add(s, expf(sc_sub_rn(v[k][l], m.m)), 0);
  }
  s = sc_red_all<TPR>(sm, s);
  const float d = MODE == SC_SOFTMAX_LOG ? logf(s.s) : s.s;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int64_t r = ((int64_t)k * TPR + t) * VEC;
    if (live && r < Ix::R) {
      sc_vec<float, VEC> c;
#pragma unroll
      for (int l = 0; l < VEC; ++l) c.v[l] = sc_softmax_out<MODE>(v[k][l], m.m, d);
      sc_store<VEC>(out + r, sc_red_ep_vec<VEC, TO>(ep, g * Ix::R + r, c));
    }
  }
}

// Thread t's vectors of a row of R elements, r = t * VEC, + TPR * VEC, ..., each loaded by load(r)
// and handed to put(r, vector); SC_RED_U of them loaded before any is put (a softmax's writing pass).
template <int TPR, int VEC, class V, class Load, class Put>
SC_INLINE void sc_row_vectors(int t, int64_t R, const Load& load, const Put& put) {
  constexpr int64_t STEP = (int64_t)TPR * VEC;
  int64_t r = (int64_t)t * VEC;
  for (; r + (SC_RED_U - 1) * STEP < R; r += SC_RED_U * STEP) {
    V c[SC_RED_U];
#pragma unroll
    for (int u = 0; u < SC_RED_U; ++u) c[u] = load(r + u * STEP);
#pragma unroll
    for (int u = 0; u < SC_RED_U; ++u) put(r + u * STEP, c[u]);
  }
  for (; r < R; r += STEP) put(r, load(r));
}

// A longer row: an online max/sum pass (vector loads), then a pass that writes.
template <class Ix, int MODE, int VEC, int WVEC, int TPR, class T, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_softmax_rows(const T* __restrict__ x, TO* __restrict__ y, const Ep ep = Ep{}) {
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
  if constexpr (VEC == 1 && WVEC == 1) {
    // (also a strided row, as a transposed view's: its elements where Ix::off puts them)
#pragma unroll 4
    for (int64_t r = t; r < Ix::R; r += TPR)
      out[r] = sc_from_f<TO>(ep(g * Ix::R + r, sc_softmax_out<MODE>(sc_to_f(row[Ix::off(r)]), st.m, d)));
  } else {
    auto put = [&](int64_t r, const sc_vec<T, WVEC>& c) {
      sc_vec<float, WVEC> o;
#pragma unroll
      for (int l = 0; l < WVEC; ++l) o.v[l] = sc_softmax_out<MODE>(sc_to_f(c.v[l]), st.m, d);
      sc_store<WVEC>(out + r, sc_red_ep_vec<WVEC, TO>(ep, g * Ix::R + r, o));
    };
    sc_row_vectors<TPR, WVEC, sc_vec<T, WVEC>>(t, Ix::R, [&](int64_t r) { return sc_load<WVEC>(row + r); }, put);
  }
}

// Softmax over a prologue (`ld`, as for the reductions): the operand's pointwise ops run in both
// passes instead of being stored once and read twice. A row serially (columns, and host entries)...
template <class Ix, int MODE, int64_t INNER, class Ld, class TO, class Ep = sc_red_no_ep>
SC_INLINE void sc_softmax_col_ld(const Ld& ld, TO* __restrict__ y, int64_t o, const Ep& ep = Ep{}) {
  const sc_red_lse op{0.0f, 0.0f};
  const auto st = sc_red_part_ld<sc_red_lse, Ix>(op, ld, o, 0, Ix::R, 0, 1);
  const float d = sc_softmax_div<MODE>(st);
  const int64_t b = Ix::base(o);
  const int64_t e0 = (o / INNER) * Ix::R * INNER + o % INNER;
  for (int64_t r = 0; r < Ix::R; ++r)
    y[e0 + r * INNER] = sc_from_f<TO>(ep(e0 + r * INNER, sc_softmax_out<MODE>(ld(b + Ix::off(r)), st.m, d)));
}

template <class Ix, int MODE, int64_t INNER, class Ld, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(SC_RED_BLOCK) sc_softmax_cols_ld(const Ld ld, TO* __restrict__ y, const Ep ep = Ep{}) {
  const int64_t o = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (o < Ix::N) sc_softmax_col_ld<Ix, MODE, INNER>(ld, y, o, ep);
}

// sc_softmax_cols_split's form with a loader (the operand computed as it is read, both passes).
template <class Ix, int MODE, int64_t INNER, int WARPS, class Ld, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(32 * WARPS)
sc_softmax_cols_split_ld(const Ld ld, TO* __restrict__ y, const Ep ep = Ep{}) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t o = (int64_t)blockIdx.x * 32 + lane;
  const bool live = o < Ix::N;
  const sc_red_lse op{0.0f, 0.0f};
  const int64_t chunk = (Ix::R + WARPS - 1) / WARPS, lo = w * chunk, hi = lo + chunk < Ix::R ? lo + chunk : Ix::R;
  auto st = op.init();
  if (live && lo < hi) st = sc_red_part_ld<sc_red_lse, Ix>(op, ld, o, lo, hi, 0, 1);
  const auto all = sc_merge_warp_slices<WARPS>(op, st);
  if (!live) return;
  const float d = sc_softmax_div<MODE>(all);
  const int64_t b = Ix::base(o);
  const int64_t e0 = (o / INNER) * Ix::R * INNER + o % INNER;
  for (int64_t r = lo; r < hi; ++r)
    y[e0 + r * INNER] = sc_from_f<TO>(ep(e0 + r * INNER, sc_softmax_out<MODE>(ld(b + Ix::off(r)), all.m, d)));
}

// ...and a group of TPR threads per contiguous row: the online max/sum pass, then the writes.
// VEC > 1 (the host asks: rows a multiple of VEC, contiguous, the loader's inputs and y aligned):
// both passes read the loader's vectors and the second stores whole vectors.
template <class Ix, int MODE, int TPR, int VEC = 1, class Ld, class TO, class Ep = sc_red_no_ep>
__global__ void __launch_bounds__(TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR)
sc_softmax_rows_ld(const Ld ld, TO* __restrict__ y, const Ep ep = Ep{}) {
  constexpr int BS = TPR < SC_RED_BLOCK ? SC_RED_BLOCK : TPR;
  const int64_t g = sc_red_group<TPR, BS>(Ix::N);
  if (g < 0) return;
  const int t = threadIdx.x % TPR;
  const sc_red_lse op{0.0f, 0.0f};
  const auto st = sc_red_all<TPR>(op, sc_red_part_ldv<sc_red_lse, Ix, VEC>(op, ld, g, 0, Ix::R, t, TPR));
  if (!SC_RED_LIVE(Ix::N)) return;
  const float d = sc_softmax_div<MODE>(st);
  const int64_t b = Ix::base(g);
  TO* out = y + g * Ix::R;
  if constexpr (VEC > 1) {
    auto put = [&](int64_t r, const sc_vec<float, VEC>& c) {
      sc_vec<float, VEC> v;
#pragma unroll
      for (int l = 0; l < VEC; ++l) v.v[l] = sc_softmax_out<MODE>(c.v[l], st.m, d);
      sc_store<VEC>(out + r, sc_red_ep_vec<VEC, TO>(ep, g * Ix::R + r, v));
    };
    sc_row_vectors<TPR, VEC, sc_vec<float, VEC>>(t, Ix::R, [&](int64_t r) { return ld.template vec<VEC>(b + r); },
                                                 put);
  } else {
#pragma unroll 4
    for (int64_t r = t; r < Ix::R; r += TPR)
      out[r] = sc_from_f<TO>(ep(g * Ix::R + r, sc_softmax_out<MODE>(ld(b + Ix::off(r)), st.m, d)));
  }
}

// Inclusive scans in fp32, by their combining operation: cumsum, cumprod, logcumsumexp.
#define SC_SCAN_SUM 0
#define SC_SCAN_PROD 1
#define SC_SCAN_LSE 2

// log(exp(a) + exp(b)) as ATen's logcumsumexp combines (_log_add_exp_helper): NaN propagates, and two
// equal infinities give themselves (where their difference would be NaN).
SC_INLINE float sc_log_add_exp(float a, float b) {
  const float lo = isnan(b) ? b : (isnan(a) ? a : fminf(a, b));
  const float hi = isnan(b) ? b : (isnan(a) ? a : fmaxf(a, b));
  return (lo != hi || isfinite(lo)) ? log1pf(expf(sc_sub_rn(lo, hi))) + hi : a;
}

template <int OP> SC_INLINE float sc_scan_op(float a, float b) {
  return OP == SC_SCAN_PROD ? a * b : OP == SC_SCAN_LSE ? sc_log_add_exp(a, b) : a + b;
}
template <int OP> SC_INLINE float sc_scan_id() {
  return OP == SC_SCAN_PROD ? 1.0f : OP == SC_SCAN_LSE ? -INFINITY : 0.0f;
}

// A product rounded to the result's type, as ATen's cumprod multiplies in scalar_t: where the
// running product leaves fp16's range matters, since 0 and inf stick.
template <class TO> SC_INLINE float sc_scan_round(float v) { return sc_to_f(sc_from_f<TO>(v)); }

template <class Ix, int OP, int64_t INNER, class T, class TO>
SC_INLINE void sc_scan_col(const T* __restrict__ x, TO* __restrict__ y, int64_t o) {
  const T* row = x + Ix::base(o);
  TO* out = y + (o / INNER) * Ix::R * INNER + o % INNER;
  float acc = sc_scan_id<OP>();
  for (int64_t r = 0; r < Ix::R; ++r) {
    acc = sc_scan_op<OP>(acc, sc_to_f(row[Ix::off(r)]));
    if (OP == SC_SCAN_PROD) acc = sc_scan_round<TO>(acc);
    out[r * INNER] = sc_from_f<TO>(acc);
  }
}

template <class Ix, int OP, int64_t INNER, class T, class TO>
__global__ void __launch_bounds__(SC_RED_BLOCK) sc_scan_cols(const T* __restrict__ x, TO* __restrict__ y) {
  const int64_t o = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (o < Ix::N) sc_scan_col<Ix, OP, INNER>(x, y, o);
}

// cummax (MAX) and cummin as ATen's cummax_cummin_helper: the first element starts the line; a NaN,
// or a value >= (<=) the running one while that is not NaN, takes over with its index (a later equal
// value wins; after a NaN only another NaN does). y or idx may be null (that result unread).
template <class Ix, bool MAX, int64_t INNER, class T>
SC_INLINE void sc_cumext_col(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ idx, int64_t o) {
  const T* row = x + Ix::base(o);
  const int64_t first = (o / INNER) * Ix::R * INNER + o % INNER;
  float best = 0.f;
  int64_t at = 0;
  for (int64_t r = 0; r < Ix::R; ++r) {
    const float v = sc_to_f(row[Ix::off(r)]);
    if (r == 0 || v != v || (best == best && (MAX ? v >= best : v <= best))) {
      best = v;
      at = r;
    }
    if (y) y[first + r * INNER] = sc_from_f<T>(best);
    if (idx) idx[first + r * INNER] = at;
  }
}

template <class Ix, bool MAX, int64_t INNER, class T>
__global__ void __launch_bounds__(SC_RED_BLOCK) sc_cumext_cols(const T* __restrict__ x, T* __restrict__ y,
                                                               int64_t* __restrict__ idx) {
  const int64_t o = (int64_t)blockIdx.x * SC_RED_BLOCK + threadIdx.x;
  if (o < Ix::N) sc_cumext_col<Ix, MAX, INNER>(x, y, idx, o);
}

// A row in tiles of TPR * VEC: each thread scans its VEC elements, the group scans the threads'
// totals (warp shuffles, then the warps' totals), and a carry runs from tile to tile.
template <class Ix, int OP, int VEC, int TPR, class T, class TO>
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
  const float id = sc_scan_id<OP>();
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
    for (int l = 1; l < VEC; ++l) v[l] = sc_scan_op<OP>(v[l - 1], v[l]);
    float inc = v[VEC - 1];
#pragma unroll
    for (int d = 1; d < W; d <<= 1) {
      const float n = __shfl_up_sync(0xffffffffu, inc, d, W);
      if (lane >= d) inc = sc_scan_op<OP>(n, inc);
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
        if (k < t / 32) wb = sc_scan_op<OP>(wb, wsum[k]);
        total = sc_scan_op<OP>(total, wsum[k]);
      }
      __syncthreads();
      before = sc_scan_op<OP>(wb, before);
    } else {
      total = __shfl_sync(0xffffffffu, inc, W - 1, W);
    }
    const float start = sc_scan_op<OP>(carry, before);
    if (live && VEC > 1 && full) {
      sc_vec<TO, VEC> c;
#pragma unroll
      for (int l = 0; l < VEC; ++l) c.v[l] = sc_from_f<TO>(sc_scan_op<OP>(start, v[l]));
      sc_store<VEC>(out + r0, c);
    } else if (live) {
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        if (r0 + l < Ix::R) out[r0 + l] = sc_from_f<TO>(sc_scan_op<OP>(start, v[l]));
    }
    carry = sc_scan_op<OP>(carry, total);
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
