"""Layer, group, batch (instance) and RMS norm: one description, four kernel shapes.

Every op is described the same way (`_Norm`): R rows of statistics, each of COUNT elements laid
out in runs of S contiguous elements SEG_STRIDE apart (one run for layer/group norm, N runs for
batch norm over [N, C, S]), plus the index of an element's weight and bias. From that, one of:

- fused: a row fits in registers (TPR threads x ITEMS vectors): one read, exact two-pass statistics,
  one write. Small rows share a warp.
- split: rows too long or too few for that (layer norm over 4M elements, batch norm over N*H*W):
  every row is cut into chunks of CH elements over many blocks, whose partial statistics (n, mean,
  M2) go to scratch; a warp per row (a block, for thousands of chunks) merges them with Chan's
  formula, then the chunks are normalised.
- column: batch norm over [N, C] (S == 1): a block reads 32*VEC adjacent channels down a slice of
  the rows (coalesced), Welford per column; then the same merge and an elementwise pass.
- eval: batch norm with the running statistics: per-channel scale from them, then elementwise.

Statistics are of x - K, K being the row's first element: the mean of a row with a huge mean and a
tiny spread then comes out rounded once (K + mean of the small differences), and the variance never
subtracts two large sums (vector-local two-pass or Welford, merged with Chan's formula). Outputs are
((x - mean) * rstd) * w + b as PyTorch computes them, never x * scale + shift, which loses the
small spread to cancellation.

Every kernel has a `NAME_host` twin that runs the same per-thread helpers (addressing, chunking,
merging, affine) serially on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from string import Template

from stitchcuda.agents.coder.codegen import C_TYPES, ITEM_SIZE, THREADS, VECTOR_BYTES, KernelArg, c_float
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, OutSpec
from stitchcuda.agents.graph import contiguous_strides

SMS = 132  # H100; only sizes grids (enough blocks to fill it), never affects results
FUSED_ITEMS = 8  # vectors a thread holds in registers in the fused kernel
FUSED_TPR = 512  # most threads per row in the fused kernel
SPLIT_ITER = 8  # vectors per thread and chunk in the split kernels
COL_WARPS = THREADS // 32
FLOATS = ("float32", "float16", "bfloat16")


@dataclass
class _Norm:
    op: str
    x: Operand
    rows: int  # R: rows of statistics (layer-norm rows, (n, group) pairs, channels)
    count: int  # elements per row
    seg: int  # S: a row's elements come in runs of S contiguous ones...
    seg_stride: int  # ...SEG_STRIDE apart
    row_stride: int  # distance between the first elements of consecutive rows
    pidx: str  # C expression of the weight/bias index of row r's element k
    run: int  # the weight index is constant over runs of RUN elements (0: it is the element's own)
    outputs: list[OutSpec | None]  # y, mean, rstd[, new running mean, new running var]
    weight: Operand | None = None
    bias: Operand | None = None
    running_mean: Operand | None = None
    running_var: Operand | None = None
    eps: float = 1e-5
    momentum: float = 0.1
    training: bool = True  # statistics of the batch; False: batch norm with the running ones
    rms: bool = False
    update: bool = False  # write momentum-updated running statistics
    mutate: bool = False  # ...into the running buffers themselves (else into outputs 3 and 4)


# ---------------------------------------------------------------------------------------------
# Emitters: from the node's arguments to a _Norm


def _dense(op: Operand) -> bool:
    want = contiguous_strides(op.shape)
    return all(n == 1 or s == w for n, s, w in zip(op.shape, op.strides, want, strict=True))


def _operand(args: dict, key: str, numel: int | None = None) -> Operand | None:
    op = args.get(key)
    if op is None:
        return None
    if not isinstance(op, Operand):
        raise NotSupported(f"{key}={op!r} is not a tensor")
    if op.dtype not in FLOATS:
        raise NotSupported(f"{key} has dtype {op.dtype}")
    if not _dense(op):
        raise NotSupported(f"{key} is a strided view")
    if numel is not None and op.numel != numel:
        raise NotSupported(f"{key} has {op.numel} elements, expected {numel}")
    return op


def _input(ctx: EmitContext) -> Operand:
    x = _operand(ctx.args, "input")
    if x is None:
        raise NotSupported("no input tensor")
    if x.numel == 0:
        raise NotSupported("empty input")
    out = ctx.outputs[0]
    if out is None or tuple(out.shape) != x.shape or out.dtype not in FLOATS:
        raise NotSupported("the normalised output is not used, or has another shape or dtype")
    return x


def _layer_norm(ctx: EmitContext, rms: bool = False) -> Kernel:
    x = _input(ctx)
    shape = [int(s) for s in ctx.args["normalized_shape"]]
    if not shape or tuple(shape) != x.shape[len(x.shape) - len(shape) :]:
        raise NotSupported(f"normalized_shape {shape} is not the trailing shape of {list(x.shape)}")
    count = math.prod(shape)
    eps = ctx.args.get("eps")
    if eps is None:  # _fused_rms_norm's default: the epsilon of fp32 (its math type), whatever x's dtype
        eps = 1.1920928955078125e-07
    norm = _Norm(
        op=ctx.node["op"],
        x=x,
        rows=x.numel // count,
        count=count,
        seg=count,
        seg_stride=count,
        row_stride=count,
        pidx="k",
        run=0,
        outputs=[ctx.outputs[0], None, ctx.outputs[1]] if rms else list(ctx.outputs),
        weight=_operand(ctx.args, "weight", count),
        bias=None if rms else _operand(ctx.args, "bias", count),
        eps=float(eps),
        rms=rms,
    )
    return _build(norm, ctx)


def _rms_norm(ctx: EmitContext) -> Kernel:
    return _layer_norm(ctx, rms=True)


def _group_norm(ctx: EmitContext) -> Kernel:
    x = _input(ctx)
    n, c, hw, groups = (int(ctx.args[k]) for k in ("N", "C", "HxW", "group"))
    if n * c * hw != x.numel or groups <= 0 or c % groups or len(x.shape) < 2 or x.shape[:2] != (n, c):
        raise NotSupported(f"group norm N={n} C={c} HxW={hw} group={groups} on {list(x.shape)}")
    per = c // groups
    norm = _Norm(
        op="native_group_norm",
        x=x,
        rows=n * groups,
        count=per * hw,
        seg=per * hw,
        seg_stride=per * hw,
        row_stride=per * hw,
        pidx=f"(r % {groups}) * {per} + k / {hw}",
        run=hw,
        outputs=list(ctx.outputs),
        weight=_operand(ctx.args, "weight", c),
        bias=_operand(ctx.args, "bias", c),
        eps=float(ctx.args["eps"]),
    )
    return _build(norm, ctx)


def _batch_norm(ctx: EmitContext) -> Kernel:
    x = _input(ctx)
    op = ctx.node["op"]
    if len(x.shape) < 2:
        raise NotSupported(f"batch norm of a {len(x.shape)}-D input")
    n, c = x.shape[0], x.shape[1]
    s = x.numel // (n * c)
    training = bool(ctx.args.get("training", False))  # _no_training has no such argument
    rm = _operand(ctx.args, "running_mean", c)
    rv = _operand(ctx.args, "running_var", c)
    if (rm is None) != (rv is None):
        raise NotSupported("only one of running_mean and running_var")
    functional = op == "_native_batch_norm_legit_functional"
    if not training and rm is None:
        raise NotSupported("batch norm in eval mode without running statistics")
    if training and n * s == 1:
        raise NotSupported("training batch norm over one value per channel")
    extra = ctx.outputs[3:]
    if any(o is not None for o in extra) and not (functional and training):
        raise NotSupported(f"{op}: the updated running statistics of eval mode")
    norm = _Norm(
        op=op,
        x=x,
        rows=c,
        count=n * s,
        seg=s,
        seg_stride=c * s,
        row_stride=s,
        pidx="r",
        run=s,
        outputs=list(ctx.outputs),
        weight=_operand(ctx.args, "weight", c),
        bias=_operand(ctx.args, "bias", c),
        running_mean=rm,
        running_var=rv,
        eps=float(ctx.args["eps"]),
        momentum=float(ctx.args.get("momentum") or 0.0),
        training=training,
        update=training and rm is not None,
        mutate=training and rm is not None and not functional,
    )
    if functional and norm.update:
        # The functional form returns the new statistics instead of writing them in place.
        if all(o is None for o in extra):
            norm.update = False
        elif any(o is None for o in extra):
            raise NotSupported(f"{op}: only one of the updated running statistics is read")
    return _build(norm, ctx)


EMITTERS = {
    "native_layer_norm": _layer_norm,
    "native_group_norm": _group_norm,
    "native_batch_norm": _batch_norm,
    "_native_batch_norm_legit": _batch_norm,
    "_native_batch_norm_legit_no_training": _batch_norm,
    "_native_batch_norm_legit_functional": _batch_norm,
    "_fused_rms_norm": _rms_norm,
}


# ---------------------------------------------------------------------------------------------
# C++: the family helpers, the per-kernel description, then one of four kernel shapes

_FAMILY = r"""
#ifndef SC_NORM_H
#define SC_NORM_H
// Partial statistics of a set of values: count, mean, sum of squared deviations from the mean.
struct sc_wf { float n, mean, m2; };
SC_INLINE sc_wf sc_wf_make(float n, float mean, float m2) { sc_wf w; w.n = n; w.mean = mean; w.m2 = m2; return w; }
// Chan et al.'s merge; stable for any sizes and means (no difference of large sums).
SC_INLINE sc_wf sc_wf_merge(sc_wf a, sc_wf b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  const float n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
  return sc_wf_make(n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f);
}
template <int VEC>
SC_INLINE sc_wf sc_wf_of(const float (&d)[VEC]) {  // exact two-pass over a vector in registers
  float s = 0.0f, q = 0.0f;
#pragma unroll
  for (int l = 0; l < VEC; ++l) s += d[l];
  const float m = s * (1.0f / VEC);
#pragma unroll
  for (int l = 0; l < VEC; ++l) q += (d[l] - m) * (d[l] - m);
  return sc_wf_make((float)VEC, m, q);
}
SC_INLINE sc_wf sc_merge(sc_wf a, sc_wf b) { return sc_wf_merge(a, b); }
SC_INLINE float sc_merge(float a, float b) { return a + b; }
SC_INLINE sc_wf sc_load_wf(const float* p) { return sc_wf_make(p[0], p[1], p[2]); }
SC_INLINE void sc_store_wf(float* p, sc_wf w) { p[0] = w.n; p[1] = w.mean; p[2] = w.m2; }
#ifdef __CUDACC__
__device__ __forceinline__ float sc_shfl_xor(float a, int o) { return __shfl_xor_sync(0xffffffffu, a, o); }
__device__ __forceinline__ sc_wf sc_shfl_xor(sc_wf a, int o) {
  return sc_wf_make(sc_shfl_xor(a.n, o), sc_shfl_xor(a.mean, o), sc_shfl_xor(a.m2, o));
}
// Reduce over aligned groups of `width` threads (a power of two); every thread gets its group's
// result, bit-identical across the group (the lower half is always merged first). Called by all
// threads of the block alike; `sh` holds blockDim.x / 32 values and is only used past a warp.
template <class V>
__device__ __forceinline__ V sc_group_reduce(V a, int width, V* sh) {
  const int lane = threadIdx.x & 31;
  const int span = width < 32 ? width : 32;
  for (int o = 1; o < span; o <<= 1) {
    const V b = sc_shfl_xor(a, o);
    a = (lane & o) ? sc_merge(b, a) : sc_merge(a, b);
  }
  if (width > 32) {
    const int warp = threadIdx.x >> 5, per = width >> 5, first = warp - warp % per;
    __syncthreads();  // the previous reduction may still be reading sh
    if (lane == 0) sh[warp] = a;
    __syncthreads();
    a = sh[first];
    for (int i = 1; i < per; ++i) a = sc_merge(a, sh[first + i]);
  }
  return a;
}
#endif
#endif  // SC_NORM_H
"""

_COMMON = r"""
namespace ${N}_impl {
typedef $XT XT; typedef $YT YT; typedef $WT WT; typedef $BT BT; typedef $RMT RMT; typedef $RVT RVT;
typedef $MT MT; typedef $ST ST; typedef $RMDT RMDT; typedef $RVDT RVDT;
constexpr int THREADS = $THREADS, VMAX = $VMAX;
constexpr int64_t R = ${R}LL, COUNT = ${COUNT}LL, S = ${S}LL, SEG_STRIDE = ${SEG_STRIDE}LL;
constexpr int64_t ROW_STRIDE = ${ROW_STRIDE}LL, RUN = ${RUN}LL, NUMEL = ${NUMEL}LL;
constexpr bool SEGMENTED = $SEGMENTED, RMS = $RMS, HAS_W = $HAS_W, HAS_B = $HAS_B;
constexpr bool HAS_MEAN = $HAS_MEAN, HAS_RSTD = $HAS_RSTD, UPDATE = $UPDATE;
constexpr float COUNTF = $COUNTF, COUNT_M1F = $COUNT_M1F, EPS = $EPS, MOMENTUM = $MOMENTUM;

struct Args {
  const XT* x; const WT* w; const BT* b; const RMT* rm; const RVT* rv;
  YT* y; MT* mean; ST* rstd; RMDT* rm_dst; RVDT* rv_dst;
  float* part;  // partial statistics, 3 floats per (row, chunk)
  float* stat;  // per row: mean (0 for RMS norm) and rstd, as the normalising pass uses them
};

SC_INLINE int64_t addr(int64_t r, int64_t k) {  // element k of row r
  if constexpr (SEGMENTED) return r * ROW_STRIDE + (k / S) * SEG_STRIDE + k % S;
  else return r * ROW_STRIDE + k;
}
SC_INLINE int64_t pidx(int64_t r, int64_t k) { (void)r; (void)k; return $PIDX; }
SC_INLINE float affine(const Args& a, float x, float mean, float rstd, int64_t p) {
  float y = (x - mean) * rstd;
  if constexpr (HAS_W) y = y * sc_to_f(a.w[p]);
  if constexpr (HAS_B) y = y + sc_to_f(a.b[p]);
  (void)a; (void)p;
  return y;
}
// Normalise the vector xv of row r's elements k..k+VEC-1 (k a multiple of VEC) and store it.
template <int VEC>
SC_INLINE void normalise(const Args& a, int64_t r, int64_t k, const sc_vec<XT, VEC>& xv, float mean, float rstd) {
  const int64_t p0 = pidx(r, k);
  sc_vec<YT, VEC> yv;
  if constexpr (RUN == 0) {  // per-element weights (layer norm): whole vectors of them
    sc_vec<WT, VEC> wv;
    sc_vec<BT, VEC> bv;
    if constexpr (HAS_W) wv = sc_load<VEC>(a.w + p0);
    if constexpr (HAS_B) bv = sc_load<VEC>(a.b + p0);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      float y = (sc_to_f(xv.v[l]) - mean) * rstd;
      if constexpr (HAS_W) y = y * sc_to_f(wv.v[l]);
      if constexpr (HAS_B) y = y + sc_to_f(bv.v[l]);
      yv.v[l] = sc_from_f<YT>(y);
    }
  } else {
#pragma unroll
    for (int l = 0; l < VEC; ++l) {  // the channel is constant over runs of RUN elements
      const int64_t p = RUN % VEC == 0 ? p0 : pidx(r, k + l);
      yv.v[l] = sc_from_f<YT>(affine(a, sc_to_f(xv.v[l]), mean, rstd, p));
    }
  }
  sc_store<VEC>(a.y + addr(r, k), yv);
}
// Whole vectors of x, y (and of w, b when they follow the element) are aligned.
SC_INLINE bool aligned(const Args& a, int vec) {
  const bool wb = RUN != 0 || ((!HAS_W || sc_aligned(a.w, vec)) && (!HAS_B || sc_aligned(a.b, vec)));
  return vec > 1 && sc_aligned(a.x, vec) && sc_aligned(a.y, vec) && wb;
}
SC_INLINE float rstd_of(float mean, float m2) {
  const float var = m2 / COUNTF;
  return 1.0f / sqrtf((RMS ? var + mean * mean : var) + EPS);
}
// Row r's statistics are final: store the ones the graph reads, update the running statistics.
SC_INLINE void record(const Args& a, int64_t r, float mean, float m2, float rstd) {
  if constexpr (HAS_MEAN) a.mean[r] = sc_from_f<MT>(mean);
  if constexpr (HAS_RSTD) a.rstd[r] = sc_from_f<ST>(rstd);
  if constexpr (UPDATE) {
    a.rm_dst[r] = sc_from_f<RMDT>(MOMENTUM * mean + (1.0f - MOMENTUM) * sc_to_f(a.rm[r]));
    a.rv_dst[r] = sc_from_f<RVDT>(MOMENTUM * (m2 / COUNT_M1F) + (1.0f - MOMENTUM) * sc_to_f(a.rv[r]));
  }
  (void)a; (void)r; (void)mean; (void)m2; (void)rstd;
}
template <int VEC>
SC_INLINE void apply_vec(const Args& a, int64_t r, int64_t k, float mean, float rstd) {
  normalise<VEC>(a, r, k, sc_load<VEC>(a.x + addr(r, k)), mean, rstd);
}
// Merge the P partials of row r and finish it (stat gets what the normalising pass needs).
SC_INLINE void finish_row(const Args& a, int64_t r, sc_wf s) {
  const float mean = sc_to_f(a.x[addr(r, 0)]) + s.mean;
  const float rstd = rstd_of(mean, s.m2);
  record(a, r, mean, s.m2, rstd);
  a.stat[2 * r] = RMS ? 0.0f : mean;
  a.stat[2 * r + 1] = rstd;
}
#ifdef __CUDACC__
// FW threads merge the P partials of a row: a warp when P is small, a block for thousands.
template <int FW>
__global__ void __launch_bounds__(THREADS) final_kernel(Args a, int64_t P) {
  __shared__ sc_wf sh[THREADS / 32];
  const int64_t r0 = (int64_t)blockIdx.x * (THREADS / FW) + threadIdx.x / FW;
  const int64_t r = r0 < R ? r0 : R - 1;  // spare groups redo the last row: reductions stay uniform
  const int t = threadIdx.x % FW;
  sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
  for (int64_t j = t; j < P; j += FW) s = sc_wf_merge(s, sc_load_wf(a.part + 3 * (r * P + j)));
  s = sc_group_reduce(s, FW, sh);
  if (t == 0 && r0 < R) finish_row(a, r, s);
}
static void final_launch(const Args& a, int64_t P, cudaStream_t stream) {
  if (P > 256) final_kernel<THREADS><<<(unsigned)R, THREADS, 0, stream>>>(a, P);
  else final_kernel<32><<<(unsigned)((R + THREADS / 32 - 1) / (THREADS / 32)), THREADS, 0, stream>>>(a, P);
}
#endif
static void final_host(const Args& a, int64_t P) {
  for (int64_t r = 0; r < R; ++r) {
    sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
    for (int64_t j = 0; j < P; ++j) s = sc_wf_merge(s, sc_load_wf(a.part + 3 * (r * P + j)));
    finish_row(a, r, s);
  }
}
// Elementwise normalisation of a [N, C=R, S] tensor with per-channel stat (batch norm).
template <int VEC>
SC_INLINE void ew_vec(const Args& a, int64_t i) {
  const sc_vec<XT, VEC> xv = sc_load<VEC>(a.x + i);
  sc_vec<YT, VEC> yv;
  const int64_t c0 = (i / S) % R;
#pragma unroll
  for (int l = 0; l < VEC; ++l) {
    int64_t c = c0;
    if constexpr (S == 1 && R % VEC == 0) c = c0 + l;
    else if constexpr (S % VEC != 0) c = ((i + l) / S) % R;
    yv.v[l] = sc_from_f<YT>(affine(a, sc_to_f(xv.v[l]), a.stat[2 * c], a.stat[2 * c + 1], c));
  }
  sc_store<VEC>(a.y + i, yv);
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) ew_kernel(Args a) {
  const int64_t step = (int64_t)gridDim.x * THREADS;
  for (int64_t v = (int64_t)blockIdx.x * THREADS + threadIdx.x; v < NUMEL / VEC; v += step) ew_vec<VEC>(a, v * VEC);
}
#endif
"""

_FUSED = r"""
constexpr int TPR = $TPR, RB = $RB, FB = TPR * RB;
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(FB) fused_kernel(Args a) {
  constexpr int ITEMS = (int)((COUNT + TPR * VEC - 1) / (TPR * VEC));
  __shared__ float sh[FB / 32 > 0 ? FB / 32 : 1];
  const int t = threadIdx.x % TPR;
  const int64_t r0 = (int64_t)blockIdx.x * RB + threadIdx.x / TPR;
  const bool live = r0 < R;
  const int64_t r = live ? r0 : R - 1;  // spare groups redo the last row: reductions stay uniform
  const float K = sc_to_f(a.x[addr(r, 0)]);
  sc_vec<XT, VEC> v[ITEMS];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int64_t k = ((int64_t)i * TPR + t) * VEC;
    if (k < COUNT) {
      v[i] = sc_load<VEC>(a.x + addr(r, k));
#pragma unroll
      for (int l = 0; l < VEC; ++l) s += sc_to_f(v[i].v[l]) - K;
    }
  }
  s = sc_group_reduce(s, TPR, sh);
  const float mean = K + s / COUNTF;
  float q = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (((int64_t)i * TPR + t) * VEC < COUNT) {
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const float e = sc_to_f(v[i].v[l]) - mean;
        q += e * e;
      }
    }
  }
  q = sc_group_reduce(q, TPR, sh);
  const float rstd = rstd_of(mean, q);
  if (!live) return;
  if (t == 0) record(a, r, mean, q, rstd);
  const float m = RMS ? 0.0f : mean;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int64_t k = ((int64_t)i * TPR + t) * VEC;
    if (k < COUNT) normalise<VEC>(a, r, k, v[i], m, rstd);
  }
}
#endif
static void run_host(const Args& a) {
  for (int64_t r = 0; r < R; ++r) {
    const float K = sc_to_f(a.x[addr(r, 0)]);
    float s = 0.0f, q = 0.0f;
    for (int64_t k = 0; k < COUNT; ++k) s += sc_to_f(a.x[addr(r, k)]) - K;
    const float mean = K + s / COUNTF;
    for (int64_t k = 0; k < COUNT; ++k) {
      const float e = sc_to_f(a.x[addr(r, k)]) - mean;
      q += e * e;
    }
    const float rstd = rstd_of(mean, q);
    record(a, r, mean, q, rstd);
    for (int64_t k = 0; k < COUNT; ++k) apply_vec<1>(a, r, k, RMS ? 0.0f : mean, rstd);
  }
}
#ifdef __CUDACC__
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  const unsigned grid = (unsigned)((R + RB - 1) / RB);
  if (vec) fused_kernel<VMAX><<<grid, FB, 0, stream>>>(a);
  else fused_kernel<1><<<grid, FB, 0, stream>>>(a);
}
#endif
"""

_SPLIT = r"""
constexpr int64_t CH = ${CH}LL, P = (COUNT + CH - 1) / CH;  // chunk of a row per block
// Thread t's partial statistics of chunk p of row r (K: the row's shift).
template <int VEC>
SC_INLINE sc_wf part(const Args& a, int64_t r, int64_t p, int t, float K) {
  sc_wf acc = sc_wf_make(0.0f, 0.0f, 0.0f);
  const int64_t begin = p * CH, end = begin + CH < COUNT ? begin + CH : COUNT;
#pragma unroll 4
  for (int it = 0; it < (int)(CH / (THREADS * VEC)); ++it) {
    const int64_t k = begin + ((int64_t)it * THREADS + t) * VEC;
    if (k < end) {
      const sc_vec<XT, VEC> v = sc_load<VEC>(a.x + addr(r, k));
      float d[VEC];
#pragma unroll
      for (int l = 0; l < VEC; ++l) d[l] = sc_to_f(v.v[l]) - K;
      acc = sc_wf_merge(acc, sc_wf_of<VEC>(d));
    }
  }
  return acc;
}
template <int VEC>
SC_INLINE void apply_chunk(const Args& a, int64_t r, int64_t p, int t) {
  const float mean = a.stat[2 * r], rstd = a.stat[2 * r + 1];
  const int64_t begin = p * CH, end = begin + CH < COUNT ? begin + CH : COUNT;
#pragma unroll 4
  for (int it = 0; it < (int)(CH / (THREADS * VEC)); ++it) {
    const int64_t k = begin + ((int64_t)it * THREADS + t) * VEC;
    if (k < end) apply_vec<VEC>(a, r, k, mean, rstd);
  }
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) stats_kernel(Args a) {
  __shared__ sc_wf sh[THREADS / 32];
  // Rows fastest: the blocks running together share a slice of the weights (layer norm).
  const int64_t r = blockIdx.x % R, p = blockIdx.x / R;
  sc_wf s = part<VEC>(a, r, p, threadIdx.x, sc_to_f(a.x[addr(r, 0)]));
  s = sc_group_reduce(s, THREADS, sh);
  if (threadIdx.x == 0) sc_store_wf(a.part + 3 * (r * P + p), s);
}
template <int VEC>
__global__ void __launch_bounds__(THREADS) apply_kernel(Args a) {
  // Last chunks first: the statistics pass read them last, so they may still be in L2.
  const int64_t b = (int64_t)gridDim.x - 1 - blockIdx.x;
  apply_chunk<VEC>(a, b % R, b / R, threadIdx.x);
}
#endif
template <int VEC>
static void run_host_vec(const Args& a) {
  for (int64_t r = 0; r < R; ++r) {
    const float K = sc_to_f(a.x[addr(r, 0)]);
    for (int64_t p = 0; p < P; ++p) {
      sc_wf s = sc_wf_make(0.0f, 0.0f, 0.0f);
      for (int t = 0; t < THREADS; ++t) s = sc_wf_merge(s, part<VEC>(a, r, p, t, K));
      sc_store_wf(a.part + 3 * (r * P + p), s);
    }
  }
  final_host(a, P);
  for (int64_t b = 0; b < R * P; ++b)
    for (int t = 0; t < THREADS; ++t) apply_chunk<VEC>(a, b % R, b / R, t);
}
static void run_host(const Args& a) {
  if (aligned(a, VMAX)) run_host_vec<VMAX>(a);
  else run_host_vec<1>(a);
}
#ifdef __CUDACC__
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  const unsigned grid = (unsigned)(R * P);
  if (vec) stats_kernel<VMAX><<<grid, THREADS, 0, stream>>>(a);
  else stats_kernel<1><<<grid, THREADS, 0, stream>>>(a);
  final_launch(a, P, stream);
  if (vec) apply_kernel<VMAX><<<grid, THREADS, 0, stream>>>(a);
  else apply_kernel<1><<<grid, THREADS, 0, stream>>>(a);
}
#endif
"""

_COLUMN = r"""
// Batch norm over [NB, C=R]: blocks of 32*VEC adjacent channels times a slice of RCH rows.
constexpr int64_t NB = COUNT, RCH = ${RCH}LL, P = (NB + RCH - 1) / RCH;
constexpr int WARPS = THREADS / 32;
template <int VEC> SC_INLINE constexpr int64_t tiles() { return (R + 32 * VEC - 1) / (32 * VEC); }
// Welford down rows n0, n0 + step, ... < n1 of channels c0..c0+VEC-1 (shifted by their row 0).
template <int VEC>
SC_INLINE void colpart(const Args& a, int64_t c0, int64_t n0, int64_t n1, int step, sc_wf (&w)[VEC]) {
  float K[VEC], mean[VEC], m2[VEC], cnt = 0.0f;
#pragma unroll
  for (int l = 0; l < VEC; ++l) {
    K[l] = c0 + l < R ? sc_to_f(a.x[c0 + l]) : 0.0f;
    mean[l] = m2[l] = 0.0f;
  }
  if (c0 < R) {
    for (int64_t n = n0; n < n1; n += step) {
      const sc_vec<XT, VEC> v = sc_load<VEC>(a.x + n * R + c0);
      cnt += 1.0f;
      const float inv = 1.0f / cnt;
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const float d = sc_to_f(v.v[l]) - K[l], e = d - mean[l];
        mean[l] += e * inv;
        m2[l] += e * (d - mean[l]);
      }
    }
  }
#pragma unroll
  for (int l = 0; l < VEC; ++l) w[l] = sc_wf_make(cnt, mean[l], m2[l]);
}
#ifdef __CUDACC__
template <int VEC>
__global__ void __launch_bounds__(THREADS) colstats_kernel(Args a) {
  __shared__ sc_wf sh[WARPS][32 * VEC];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t tile = blockIdx.x % tiles<VEC>(), p = blockIdx.x / tiles<VEC>();
  const int64_t n0 = p * RCH, n1 = n0 + RCH < NB ? n0 + RCH : NB;
  sc_wf w[VEC];
  colpart<VEC>(a, (tile * 32 + tx) * VEC, n0 + ty, n1, WARPS, w);
#pragma unroll
  for (int l = 0; l < VEC; ++l) sh[ty][tx * VEC + l] = w[l];
  __syncthreads();
  for (int j = threadIdx.x; j < 32 * VEC; j += THREADS) {
    const int64_t c = tile * 32 * VEC + j;
    if (c < R) {
      sc_wf s = sh[0][j];
      for (int y = 1; y < WARPS; ++y) s = sc_wf_merge(s, sh[y][j]);
      sc_store_wf(a.part + 3 * (c * P + p), s);
    }
  }
}
#endif
template <int VEC>
static void run_host_vec(const Args& a) {
  for (int64_t p = 0; p < P; ++p) {
    const int64_t n0 = p * RCH, n1 = n0 + RCH < NB ? n0 + RCH : NB;
    for (int64_t tile = 0; tile < tiles<VEC>(); ++tile)
      for (int tx = 0; tx < 32; ++tx) {
        const int64_t c0 = (tile * 32 + tx) * VEC;
        sc_wf s[VEC], w[VEC];
        for (int ty = 0; ty < WARPS; ++ty) {
          colpart<VEC>(a, c0, n0 + ty, n1, WARPS, w);
          for (int l = 0; l < VEC; ++l) s[l] = ty == 0 ? w[l] : sc_wf_merge(s[l], w[l]);
        }
        for (int l = 0; l < VEC; ++l)
          if (c0 + l < R) sc_store_wf(a.part + 3 * ((c0 + l) * P + p), s[l]);
      }
  }
  final_host(a, P);
  for (int64_t v = 0; v < NUMEL / VEC; ++v) ew_vec<VEC>(a, v * VEC);
}
static void run_host(const Args& a) {
  if (aligned(a, VMAX)) run_host_vec<VMAX>(a);
  else run_host_vec<1>(a);
}
#ifdef __CUDACC__
template <int VEC>
static void run_device_vec(const Args& a, cudaStream_t stream) {
  colstats_kernel<VEC><<<(unsigned)(tiles<VEC>() * P), THREADS, 0, stream>>>(a);
  final_launch(a, P, stream);
  ew_kernel<VEC><<<sc_grid(NUMEL / VEC), THREADS, 0, stream>>>(a);
}
static void run_device(const Args& a, bool vec, cudaStream_t stream) {
  if (vec) run_device_vec<VMAX>(a, stream);
  else run_device_vec<1>(a, stream);
}
#endif
"""

_EVAL = r"""
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
  if (vec) ew_kernel<VMAX><<<sc_grid(NUMEL / VMAX), THREADS, 0, stream>>>(a);
  else ew_kernel<1><<<sc_grid(NUMEL), THREADS, 0, stream>>>(a);
}
#endif
"""

_LAUNCH = r"""
static Args make_args($PARAMS) {
  Args a = {};
$ASSIGN
  return a;
}
}  // namespace ${N}_impl

extern "C" int ${N}($PARAMS, cudaStream_t stream) {
  using namespace ${N}_impl;
  const Args a = make_args($NAMES);
  const bool vec = aligned(a, VMAX);
  run_device(a, vec, stream);
  return (int)cudaGetLastError();
}

extern "C" int ${N}_host($PARAMS, void* stream) {
  (void)stream;
  ${N}_impl::run_host(${N}_impl::make_args($NAMES));
  return 0;
}
"""


# ---------------------------------------------------------------------------------------------
# Choosing the kernel shape and rendering it


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _build(n: _Norm, ctx: EmitContext) -> Kernel:
    x = n.x
    ys = [o for o in n.outputs if o is not None]
    widest = max(ITEM_SIZE[x.dtype], ITEM_SIZE[n.outputs[0].dtype])  # type: ignore[union-attr]
    vmax = max(1, VECTOR_BYTES // widest)
    segmented = n.seg != n.count
    numel = x.numel

    # Which shape, and whether whole vectors stay inside a run of the layout.
    if not n.training:
        shape = "eval"
    elif segmented and n.seg == 1:
        shape = "column"
    else:
        nvec = -(-n.count // vmax)
        tpr = min(FUSED_TPR, max(4, _pow2_at_least(-(-nvec // 4))))
        fits = nvec <= tpr * FUSED_ITEMS and (n.seg >= 32 or not segmented)
        shape = "fused" if fits and (n.rows >= 2 * SMS or nvec <= 1024) else "split"
    if shape in ("eval", "column"):
        ok = numel % vmax == 0 and (n.seg % vmax == 0 or (n.seg == 1 and n.rows % vmax == 0))
    else:
        ok = n.count % vmax == 0 and (not segmented or n.seg % vmax == 0)
    if not ok or x.offset % vmax:
        vmax = 1

    subs: dict[str, str] = {"N": ctx.name, "THREADS": str(THREADS), "VMAX": str(vmax)}
    scratch: list[tuple[str, int]] = []
    if shape == "fused":
        nvec = -(-n.count // vmax)
        tpr = min(FUSED_TPR, max(4, _pow2_at_least(-(-nvec // 4))))
        rb = max(1, THREADS // tpr)
        body = Template(_FUSED).substitute(TPR=tpr, RB=rb)
        note = f"fused, {tpr} threads/row"
    elif shape == "split":
        it = SPLIT_ITER
        while it > 1 and n.rows * -(-n.count // (THREADS * vmax * it)) < 8 * SMS:
            it //= 2
        ch = THREADS * vmax * it  # the VEC=1 fallback walks the same chunks in more steps
        parts = -(-n.count // ch)
        body = Template(_SPLIT).substitute(CH=ch)
        scratch = [("float32", 3 * n.rows * parts + 2 * n.rows)]
        note = f"split, {parts} chunks/row"
    elif shape == "column":
        tiles = -(-n.rows // (32 * vmax))
        parts = max(1, min(-(-8 * SMS // tiles), n.count // (4 * COL_WARPS)))
        rch = -(-n.count // parts)
        parts = -(-n.count // rch)
        body = Template(_COLUMN).substitute(RCH=rch)
        scratch = [("float32", 3 * n.rows * parts + 2 * n.rows)]
        note = f"column, {parts} row slices"
    else:
        body = _EVAL
        scratch = [("float32", 2 * n.rows)]
        note = "eval"
    if numel >= 2**31 * THREADS or (shape == "split" and n.rows * parts >= 2**31):
        raise NotSupported(f"{n.op}: too many blocks for one launch")

    # Pointers: inputs (x, w, b, rm, rv present), outputs (those read), scratch.
    ins: list[tuple[str, Operand]] = [("x", x)]
    ins += [(k, o) for k, o in (("w", n.weight), ("b", n.bias)) if o is not None]
    ins += [(k, o) for k, o in (("rm", n.running_mean), ("rv", n.running_var)) if o is not None]
    out_fields = ["y", "mean", "rstd", "rm_dst", "rv_dst"]
    outs = [(out_fields[i], o) for i, o in enumerate(n.outputs) if o is not None]
    params = [f"const void* in{i}" for i in range(len(ins))] + [f"void* out{i}" for i in range(len(outs))]
    names = [f"in{i}" for i in range(len(ins))] + [f"out{i}" for i in range(len(outs))]
    fields = ["x", "w", "b", "rm", "rv", "y", "mean", "rstd", "rm_dst", "rv_dst"]
    type_key = dict(
        zip(fields, ["XT", "WT", "BT", "RMT", "RVT", "YT", "MT", "ST", "RMDT", "RVDT"], strict=True)
    )
    assign = []
    types = dict.fromkeys(type_key.values(), "float")
    for i, (field, op) in enumerate(ins):
        types[type_key[field]] = C_TYPES[op.dtype]
        assign.append(f"  a.{field} = static_cast<const {C_TYPES[op.dtype]}*>(in{i}) + {op.offset};")
    for i, (field, spec) in enumerate(outs):
        types[type_key[field]] = C_TYPES[spec.dtype]
        assign.append(f"  a.{field} = static_cast<{C_TYPES[spec.dtype]}*>(out{i});")
    if n.update and n.mutate:
        types["RMDT"], types["RVDT"] = types["RMT"], types["RVT"]
        assign.append("  a.rm_dst = const_cast<RMDT*>(a.rm);")
        assign.append("  a.rv_dst = const_cast<RVDT*>(a.rv);")
    if scratch:
        params.append("void* scratch0")
        names.append("scratch0")
        stat_at = scratch[0][1] - 2 * n.rows
        assign.append("  a.part = static_cast<float*>(scratch0);")
        assign.append(f"  a.stat = static_cast<float*>(scratch0) + {stat_at};")
    written = {f for f, o in outs if o is not None and math.prod(o.shape) > 0}
    for key in ("mean", "rstd"):
        if key in written and math.prod(dict(outs)[key].shape) != n.rows:
            raise NotSupported(f"{n.op}: result {key} has shape {list(dict(outs)[key].shape)}")

    def flag(b: bool) -> str:
        return "true" if b else "false"

    subs |= types
    subs |= {
        "R": str(n.rows),
        "COUNT": str(n.count),
        "S": str(n.seg),
        "SEG_STRIDE": str(n.seg_stride),
        "ROW_STRIDE": str(n.row_stride),
        "RUN": str(n.run),
        "NUMEL": str(numel),
        "SEGMENTED": flag(segmented),
        "RMS": flag(n.rms),
        "HAS_W": flag(n.weight is not None),
        "HAS_B": flag(n.bias is not None),
        "HAS_MEAN": flag(n.training and "mean" in written),
        "HAS_RSTD": flag(n.training and "rstd" in written),
        "UPDATE": flag(n.update),
        "COUNTF": c_float(n.count),
        "COUNT_M1F": c_float(max(n.count - 1, 1)),
        "EPS": c_float(n.eps),
        "MOMENTUM": c_float(n.momentum),
        "PIDX": n.pidx,
        "PARAMS": ", ".join(params),
        "NAMES": ", ".join(names),
        "ASSIGN": "\n".join(assign),
    }
    source = "\n".join(
        [_FAMILY, Template(_COMMON).substitute(subs), body, Template(_LAUNCH).substitute(subs)]
    )
    mutates = [o.name for o in (n.running_mean, n.running_var) if n.mutate and n.update and o is not None]
    return Kernel(
        name=ctx.name,
        inputs=[KernelArg(o.name, o.dtype) for _, o in ins],
        outputs=[KernelArg(o.name, o.dtype) for o in ys],
        source=source,
        ops=[f"{n.op} {n.rows}x{n.count} ({note})"],
        host=True,
        scratch=scratch,
        mutates=mutates,
    )
