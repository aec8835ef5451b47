"""Reductions, softmax and scans: sum/mean/prod/nansum, amax/amin, max/min (values and indices),
argmax/argmin, logsumexp, var/std (and var_mean/std_mean), vector norms, _softmax/_log_softmax,
cumsum/cumprod/logcumsumexp, cummax/cummin.

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
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, INTS, ITEM_SIZE, Epilogue, KernelArg, Prologue, c_float
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, OutSpec, launchers
from stitchcuda.target import Target

FLOATS = ("float32", "float16", "bfloat16")
BLOCK = 256  # threads of every block whose rows are warps, and of the column kernels
MAX_SPLITS = 4096

# ---------------------------------------------------------------------------------------------
# Shared CUDA (cuda/reduce.cuh): op structs, the per-thread part, group merges, and the row / column /
# final kernels

def red_batch() -> int:
    """Vectors a thread loads before reducing any (SC_RED_U in cuda/reduce.cuh); STITCHCUDA_RED_BATCH=0
    loads one at a time, as before 2026-12-01, for A/B timing."""
    return 1 if os.environ.get("STITCHCUDA_RED_BATCH", "1") == "0" else 4


def red_scalar_batch() -> int:
    """Scalar loads a thread has in flight on the strided and unaligned paths (SC_RED_US in
    cuda/reduce.cuh): one, the loop as it was. STITCHCUDA_RED_SCALAR_BATCH=N batches N, for A/B
    timing: 8 measured 0.97x, 1.00x and 0.99x of one on level 1's 47, 48 and 53 (column sums, mean,
    min; the H200, 2026-12-03), so it stays off."""
    if os.environ.get("STITCHCUDA_RED_BATCH", "1") == "0":
        return 1
    n = int(os.environ.get("STITCHCUDA_RED_SCALAR_BATCH", "1"))
    if not 1 <= n <= 32:
        raise ValueError(f"STITCHCUDA_RED_SCALAR_BATCH={n}: loads in flight a thread, 1 to 32")
    return n


def lse_vec() -> int:
    """Whether logsumexp's state takes a vector at a time (SC_RED_LSE_VEC in cuda/reduce.cuh);
    STITCHCUDA_LSE_VEC=0 takes an element at a time, as before 2026-12-01, for A/B timing."""
    return 0 if os.environ.get("STITCHCUDA_LSE_VEC", "1") == "0" else 1


def _header() -> str:
    return cuda_text.fill("reduce.cuh", RED_U=red_batch(), RED_US=red_scalar_batch(), LSE_VEC=lse_vec())


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


def _source(ctx: EmitContext, *, ints: bool = False) -> Operand:
    """The operand; `ints`: an integer one is taken too (the integer extremes' path)."""
    src = ctx.args.get("self")
    if not isinstance(src, Operand):
        raise NotSupported("the input is not a tensor")
    if src.dtype not in FLOATS and not (ints and src.dtype in INTS):
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
    init: str = ""  # the op struct's initialiser where it is not {p0, p1} (a sibling pair's)


def _sum(pre: str = "ID", post: str = "ID", p0: float = 0.0, p1: float = 0.0) -> OpSpec:
    # (accumulated in double: reduce.cuh's sc_red_sum says why)
    return OpSpec(f"sc_red_sum<SC_PRE_{pre}, SC_POST_{post}, double>", 8, p0, p1)


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
    src = _source(ctx, ints=kind in ("arg", "argonly", "ext"))
    if src.dtype in INTS:
        return _int_extreme(ctx, src, kind)
    lay, spec, outs, note = _reduction_spec(ctx, kind, src)
    pro = ctx.prologue if ctx.prologue is not None and ctx.prologue.node == src.name else None
    return _reduce_kernel(ctx, src, lay, spec, outs, note, pro)


def _reduction_spec(ctx: EmitContext, kind: str, src: Operand) -> tuple[Layout, OpSpec, list[OutSpec | None], str]:
    """A float reduction's layout, op struct, results (value, second) and note; NotSupported where
    the kernels cannot compute it."""
    a = ctx.args
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
        elif target.endswith(".default") or len(outs) < 2 or outs[1] is None:
            # max.default / min.default, or max.dim / min.dim whose indices nothing reads: the value
            # alone (the same values, NaN winning in both). Carrying and merging an int64 index a
            # row's threads then drop made the 128-wide min over a conv's channels 3x slower than
            # torch.compile's (H200, level2/32).
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
    if sum(o is not None for o in ctx.outputs) > (2 if spec.second else 1):
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
    return lay, spec, outs, f"{target} {list(src.shape)} dims {reduced}"


# "0": sibling reductions stay one kernel each (agents/plan/sibling_reductions.py; for same-run comparisons).
SIBLINGS_ENV = "STITCHCUDA_RED_SIBLINGS"


def siblings_on() -> bool:
    return os.environ.get(SIBLINGS_ENV, "1") != "0"


def _state_align(spec: OpSpec) -> int:
    """Alignment of the op's state: 8 where it holds a double or an int64 (sums, arg-extremes)."""
    return 8 if "double" in spec.cpp or spec.second == "int64" else 4


def sibling_pair(ctx_a: EmitContext, kind_a: str, ctx_b: EmitContext, kind_b: str, pro: Prologue) -> Kernel:
    """Two reductions of one layout over the rows of two pointwise nodes, in one pass (`pro`, from
    codegen.prologue_pair, gives both nodes' elements at once): one kernel reading what they share
    once, where two would each read it. Each gives one result (A's to the first output, B's to the
    second). The row path only: a column reduction of a plain operand has tiles and strips, which
    take no loader, and a pair there is not measured."""
    src_a, src_b = _source(ctx_a), _source(ctx_b)
    if src_a.dtype in INTS or src_b.dtype in INTS:
        raise NotSupported("integer sibling reductions")
    lay, spec_a, outs_a, note_a = _reduction_spec(ctx_a, kind_a, src_a)
    lay_b, spec_b, outs_b, note_b = _reduction_spec(ctx_b, kind_b, src_b)
    if lay != lay_b:
        raise NotSupported("sibling reductions of different layouts")
    if not (lay.rows and lay.r >= 16):
        raise NotSupported("sibling reductions off the rows")
    if outs_a[0] is None or outs_b[0] is None or outs_a[1] is not None or outs_b[1] is not None:
        raise NotSupported("sibling reductions with other than one result each")
    if "sc_red_lse" in (spec_a.cpp, spec_b.cpp):  # (its vector add takes floats only)
        raise NotSupported("logsumexp as a sibling")
    align = max(_state_align(spec_a), _state_align(spec_b))
    spec = OpSpec(
        f"sc_red_pair<{spec_a.cpp}, {spec_b.cpp}>",
        -(-spec_a.state_bytes // align) * align + -(-spec_b.state_bytes // align) * align,
        init=f"{{{c_float(spec_a.p0)}, {c_float(spec_a.p1)}}}, {{{c_float(spec_b.p0)}, {c_float(spec_b.p1)}}}",
    )
    src = replace(src_a, name=pro.node, dtype="float32")
    return _reduce_kernel(ctx_a, src, lay, spec, [outs_a[0], outs_b[0]], f"{note_a} with {note_b}", pro)


def _int_extreme(ctx: EmitContext, src: Operand, kind: str) -> Kernel:
    """max/min/amax/amin (values) and argmax/argmin or max.dim/min.dim (indices) of an integer input,
    compared as int64_t: the float kernels read every element through fp32, which is not exact past
    2^24 (token ids, positions, codes). A warp an output, lanes striding its reduced elements; ties go
    to the lower index, as ATen's. The operand is read as stored (a prologue is left to be stored)."""
    op, target = ctx.node["op"], ctx.node.get("target") or ctx.node["op"]
    if target in ("aten.max.other", "aten.min.other"):
        raise NotSupported(f"{target} is pointwise")
    reduced = _dims(ctx.args.get("dim"), len(src.shape))
    lay = _layout(src, reduced)
    if lay.r == 0 or lay.n == 0:
        raise NotSupported("empty reduction")
    outs = [*ctx.outputs, None, None][:2]
    if kind == "argonly":
        outs = [None, outs[0]]
    elif kind == "ext" or target.endswith(".default"):
        outs[1] = None
    if outs[0] is None and outs[1] is None:
        raise NotSupported("no result is used")
    for spec, dtype in zip(outs, (src.dtype, "int64"), strict=True):
        if spec is not None:
            _check_shape(spec, src, reduced)
            if spec.dtype != dtype:
                raise NotSupported(f"result dtype {spec.dtype} of an {src.dtype} {op}")
    name, t, mx = ctx.name, C_TYPES[src.dtype], "true" if op in ("max", "amax", "argmax") else "false"
    ta = C_TYPES[outs[0].dtype] if outs[0] is not None else "int64_t"
    outputs = [KernelArg(o.name, o.dtype) for o in outs if o is not None]
    raw = ["const void* in0_", *[f"void* out{k}_" for k in range(len(outputs))]]
    ya = f"static_cast<{ta}*>(out0_)" if outs[0] is not None else "nullptr"
    yb = f"static_cast<int64_t*>(out{len(outputs) - 1}_)" if outs[1] is not None else "nullptr"
    casts = [f"  const auto x = static_cast<const {t}*>(in0_);", f"  {ta}* const ya = {ya};",
             f"  int64_t* const yb = {yb};"]
    warps = BLOCK // 32
    launch = f"  {name}_kernel<<<{-(-lay.n // warps)}, {BLOCK}, 0, stream>>>(x, ya, yb);"
    host = (f"  for (int64_t o = 0; o < {name}_ix::N; ++o) {{\n    int64_t v, i;\n    {name}_part(x, o, 0, 1, v, i);\n"
            f"    if (ya) ya[o] = ({ta})v;\n    if (yb) yb[o] = i;\n  }}")
    note = f"{target} {list(src.shape)} dims {reduced}: {lay.n} x {lay.r}, {src.dtype}, a warp an output"
    source = f"""{_header()}
// {name}: {note}
{_ix_source(name, lay)}
// (v, i) takes (w, j) where w is the larger (smaller), or equal at a lower index: any order of merges
// gives the first extreme. The start (the extreme's opposite, at R) loses to every element.
SC_INLINE bool {name}_better(int64_t w, int64_t j, int64_t v, int64_t i) {{
  return {mx} ? (w > v || (w == v && j < i)) : (w < v || (w == v && j < i));
}}
SC_INLINE void {name}_part(const {t}* x, int64_t o, int64_t t, int64_t step, int64_t& v, int64_t& i) {{
  v = {mx} ? INT64_MIN : INT64_MAX;
  i = {name}_ix::R;
  const int64_t b = {name}_ix::base(o);
  for (int64_t r = t; r < {name}_ix::R; r += step) {{
    const int64_t w = (int64_t)x[b + {name}_ix::off(r)];
    if ({name}_better(w, r, v, i)) {{ v = w; i = r; }}
  }}
}}
__global__ void __launch_bounds__({BLOCK}) {name}_kernel(const {t}* x, {ta}* ya, int64_t* yb) {{
  const int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (o >= {name}_ix::N) return;  // (a whole warp: o is the warp's)
  int64_t v, i;
  {name}_part(x, o, lane, 32, v, i);
  for (int s = 16; s > 0; s >>= 1) {{
    const int64_t w = __shfl_down_sync(0xffffffffu, v, s), j = __shfl_down_sync(0xffffffffu, i, s);
    if ({name}_better(w, j, v, i)) {{ v = w; i = j; }}
  }}
  if (lane == 0) {{
    if (ya) ya[o] = ({ta})v;
    if (yb) yb[o] = i;
  }}
}}
{launchers(name, raw, casts, launch, host)}"""
    return Kernel(name=name, inputs=[KernelArg(src.name, src.dtype)], outputs=outputs, source=source, ops=[note],
                  host=True)


def _short_tpr(r: int, vec: int) -> int:
    """Threads for a short row: about four 16-byte vectors' worth of elements each (sixteen scalars
    where the row is read one element at a time), at least four threads for scalar reads (a warp's
    load then covers whole sectors of eight rows), up to a warp (several rows share one). Four
    scalars a thread left a 128-wide row's reduction bound by its per-row shuffles and index
    arithmetic (H200, level2/32: 1.65 ms against torch.compile's 0.57 ms)."""
    per_thread = max(16, 4 * vec)
    tpr = min(32, 1 << max(0, math.ceil(math.log2(max(1, -(-r // per_thread))))))
    return max(tpr, 4) if vec == 1 else tpr


def _row_plan(lay: Layout, vec: int, target: Target) -> tuple[int, int]:
    """(threads per row, splits) for the row kernel: splits only where the outputs alone would not
    fill the target's SMs."""
    if lay.r <= 2048:
        return _short_tpr(lay.r, vec), 1
    tpr = 256 if lay.r <= 16384 else 512
    want = 2 * target.sm_count * (target.max_threads_per_sm // tpr)  # groups that fill every SM twice over
    if 2 * lay.n >= want:
        return tpr, 1
    return tpr, max(1, min(-(-want // lay.n), lay.r // (16 * tpr), MAX_SPLITS))


def _loader_vec(pro: Prologue) -> int:
    """Elements a thread reads at once through a prologue's loader: 16 bytes of its widest input read
    at the element itself; 1 where the loader has no vectors (or STITCHCUDA_VEC_PROLOGUE=0)."""
    from stitchcuda.agents.coder.emit_norm import vec_prologues_on

    if not (pro.vectorised and vec_prologues_on()):
        return 1
    return 16 // max(ITEM_SIZE[a.dtype] for a, direct in zip(pro.inputs, pro.direct, strict=True) if direct)


def _col_plan(lay: Layout, target: Target) -> int:
    want = target.sm_count * target.max_threads_per_sm  # resident threads
    if 2 * lay.n >= want or lay.r < 64:
        return 1
    return max(1, min(-(-want // lay.n), lay.r // 32, MAX_SPLITS))


TILE_ENV = "STITCHCUDA_RED_TILE"


# The tile shape a column reduction takes by default, by its state's size (on an H100, bench/results/
# 2026-12-06-h100-l1-col-tiles-291a6c1-a965c28.md): 16 warps x 2 states x 2 columns for states of at
# most 8 bytes (sum, mean, max: 1.13-1.20x the thread-a-column kernel), 16 warps x 4 states x 1 column
# for larger ones (argmax and argmin's value and index: 1.07x, where two columns a thread lost 16%);
# the registers capped for a full SM's threads where the states are small (_tile_min_blocks).
SMALL_STATE_TILE = (16, 2, 2)
LARGE_STATE_TILE = (16, 4, 1)


def _tile_shape(value: str | None, state_bytes: int) -> tuple[int, int, int] | None:
    """STITCHCUDA_RED_TILE's value as (BY warps, VT states a column, CW columns a thread): unset, the
    default by the state's size; "0" off (the thread-a-column kernel); "BY" (four states, one column);
    or "BYxVTwCW" such as "16x2w2"."""
    if value is None or value == "":
        return SMALL_STATE_TILE if state_bytes <= 8 else LARGE_STATE_TILE
    if value == "0":
        return None
    m = re.fullmatch(r"(\d+)(?:x(\d+)w(\d+))?", value)
    shape = (int(m[1]), int(m[2] or 4), int(m[3] or 1)) if m else None
    if shape is None or shape[0] not in (4, 8, 16) or shape[1] not in (1, 2, 4) or shape[2] not in (1, 2, 4):
        raise ValueError(f"{TILE_ENV}={value}: BY or BYxVTwCW, with BY warps a block (4, 8 or 16), VT states a "
                         "column (1, 2 or 4) and CW columns a thread (1, 2 or 4); 0: off")
    return shape


def _tile_min_blocks(by: int, state_bytes: int, target: Target) -> int:
    """sc_red_tile's MINB (blocks an SM its registers are capped for): as many as the target's SM holds
    threads (2,048 on an H100) for states of at most 8 bytes; none for larger ones, which spilled under
    the cap (argmax and argmin on an H100: 3.5 ms capped, 3.0-3.1 ms not)."""
    return max(1, target.max_threads_per_sm // (32 * by)) if state_bytes <= 8 else 1


def _tile_plan(lay: Layout, spec: OpSpec, target: Target) -> tuple[int, int, int, int] | None:
    """(BY, VT, CW, splits) where a column reduction runs as tiles of 32 x CW columns by BY warps
    (sc_red_tile), the shape from _tile_shape; None where STITCHCUDA_RED_TILE=0, and by default where
    the columns need splits to fill the GPU, more than one dim is reduced, fewer columns than a tile's
    width are contiguous, or the rows are too few for each warp to have two rounds of loads. Splits
    (with the variable set) as the thread-a-column plan's, counting the threads a column has (BY / CW)."""
    value = os.environ.get(TILE_ENV)
    shape = _tile_shape(value, spec.state_bytes)
    if shape is None:
        return None
    by, vt, cw = shape
    want = target.sm_count * target.max_threads_per_sm
    fills = 2 * lay.n * by // cw >= want  # the columns alone fill the GPU: no splits
    # By default only where the H100 run measured tiles winning: one reduced dim, no splits, a tile's
    # row one contiguous run of columns, and two rounds of a warp's loads at least. With splits (level
    # 2's column sums over 8192 x 8192, 1024 x 128) the tiles' kernels took 8-16% longer; where a row
    # of the tile spans several batches (16 or 32 contiguous columns: a mean over D, H, W of a
    # channels-last volume, NetVLAD's sum) they won nothing.
    contiguous = bool(lay.kept) and lay.kept[-1][1] == 1 and lay.kept[-1][0] >= 32 * cw
    if not value and (not fills or len(lay.red) != 1 or not contiguous or lay.r < 2 * vt * by):
        return None
    if fills:
        return by, vt, cw, 1
    return by, vt, cw, max(1, min(-(-want * cw // (lay.n * by)), lay.r // (vt * by), MAX_SPLITS))


STRIPS_ENV = "STITCHCUDA_RED_STRIPS"
STRIPS_MAX_K = 16  # columns a thread keeps: inner up to 16 x BLOCK


def _strips_plan(lay: Layout, spec: OpSpec, target: Target) -> tuple[int, int, int, int] | None:
    """(K, outer, inner, splits) where a column reduction reads its operand as whole rows: one reduced
    dim between whole kept dims ([outer, R, inner], inner contiguous and at least a block wide).
    Off unless STITCHCUDA_RED_STRIPS=1: written after the H100 run at 20c4f6d (level 1's 47-53, the
    thread-a-column kernel at 72% of the DRAM bandwidth) and not yet timed on a GPU."""
    if os.environ.get(STRIPS_ENV, "0") != "1" or len(lay.red) != 1 or lay.r < 16 or spec.state_bytes > 16:
        return None
    r, inner = lay.red[0]
    if not BLOCK <= inner <= STRIPS_MAX_K * BLOCK or lay.kept[-1:] != ((inner, 1),):
        return None
    if len(lay.kept) == 2 and lay.kept[0][1] == r * inner:
        outer = lay.kept[0][0]
    elif len(lay.kept) == 1:
        outer = 1
    else:
        return None
    # About eight waves of blocks at four a multiprocessor, so the last wave's tail is short; each
    # block at least 16 rows, whose partial states (outer x inner x splits) stay a few % of the reads.
    want = 32 * target.sm_count
    splits = max(1, min(-(-want // outer), r // 16, MAX_SPLITS))
    return -(-inner // BLOCK), outer, inner, splits


def _reduce_kernel(
    ctx: EmitContext, src: Operand, lay: Layout, spec: OpSpec, outs: list[OutSpec | None], note: str,
    pro: Prologue | None,
) -> Kernel:
    name = ctx.name
    rows = lay.rows and lay.r >= 16
    if rows:
        if pro is None:
            vec = 16 // ITEM_SIZE[src.dtype] if lay.contig else 1
        else:  # through the loader's vectors (codegen.Prologue.vec) where it has them
            vec = _loader_vec(pro) if lay.contig else 1
        tpr, splits = _row_plan(lay, vec, ctx.target)
    else:
        tpr, splits, vec = 1, _col_plan(lay, ctx.target), 1
    strips = _strips_plan(lay, spec, ctx.target) if not rows and pro is None else None
    tile = _tile_plan(lay, spec, ctx.target) if not rows and pro is None and strips is None else None
    if strips is not None:
        splits = strips[3]
    elif tile is not None:
        splits = tile[3]
    chunk = -(-lay.r // splits)
    chunk = -(-chunk // 16) * 16 if splits > 1 else chunk  # chunk starts keep the rows' alignment
    splits = -(-lay.r // chunk)
    ctype = C_TYPES[src.dtype]
    if pro is None:
        inputs = [KernelArg(src.name, src.dtype)]
        raw, casts = ["const void* in0_"], [f"  const auto x = static_cast<const {ctype}*>(in0_);"]
    else:  # the operand's pointwise ops, computed as read: its inputs are the kernel's
        inputs = list(pro.inputs)
        raw = pro.params()
        casts = [f"  const auto x = {pro.construct(f'{name}_ld')};"]
    outputs = []
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
    casts.append(f"  const {name}_op op{{{spec.init or f'{c_float(spec.p0)}, {c_float(spec.p1)}'}}};")
    args = f"op, x, ya, yb, part, {chunk}LL, {splits}LL"
    ld = "_ld" if pro is not None else ""
    if rows:
        bs = max(tpr, BLOCK)
        blocks = -(-lay.n * splits // (bs // tpr))
        params = f"{name}_op, {name}_ix, {tpr}" if pro is not None else f"{name}_op, {name}_ix, {vec}, {tpr}"
        launch = f"  sc_red_rows{ld}<{params}><<<{blocks}, {bs}, 0, stream>>>({args});"
        host = f"  sc_red_rows{ld}_host<{params}>({args});"
        if pro is not None and vec > 1:  # the loader's vectors where its inputs are aligned (asked here)
            launch = (f"  if (x.aligned({vec}))\n  sc_red_rows_ld<{params}, {vec}><<<{blocks}, {bs}, 0, stream>>>({args});"
                      f"\n  else\n{launch}")
            host = f"  if (x.aligned({vec}))\n  sc_red_rows_ld_host<{params}, {vec}>({args});\n  else\n{host}"
    elif strips is not None:
        k_cols, outer, inner, _ = strips
        sargs = f"op, x + {lay.offset}LL, ya, yb, part, {lay.r}LL, {inner}LL, {chunk}LL, {splits}LL"
        launch = f"  sc_red_strips<{name}_op, {k_cols}><<<{outer * splits}, {BLOCK}, 0, stream>>>({sargs});"
        host = (f"  sc_red_strips_host<{name}_op, {k_cols}>(op, x + {lay.offset}LL, ya, yb, part, {outer}LL, "
                f"{lay.r}LL, {inner}LL, {chunk}LL, {splits}LL);")
    elif tile is not None:
        by, vt, cw, _ = tile
        params = f"{name}_op, {name}_ix, {by}, {vt}, {cw}"
        minb = _tile_min_blocks(by, spec.state_bytes, ctx.target)
        launch = (f"  sc_red_tile<{params}, {minb}><<<{-(-lay.n * splits // (32 * cw))}, {32 * by}, 0, stream>>>"
                  f"({args});")
        host = f"  sc_red_tile_host<{params}>({args});"
    else:
        blocks = -(-lay.n * splits // BLOCK)
        launch = f"  sc_red_cols{ld}<{name}_op, {name}_ix><<<{blocks}, {BLOCK}, 0, stream>>>({args});"
        host = f"  sc_red_cols{ld}_host<{name}_op, {name}_ix>({args});"
    if splits > 1:
        fin = f"op, part, {lay.n}LL, {splits}LL, ya, yb"
        launch += f"\n  sc_red_final<<<{-(-lay.n // (BLOCK // 32))}, {BLOCK}, 0, stream>>>({fin});"
        host += f"\n  sc_red_final_host({fin});"
    plan = (f"rows tpr {tpr} vec {vec}" if rows else f"strips of {strips[0]} columns a thread" if strips
            else f"tiles of {32 * tile[2]} columns by {tile[0]} warps, {tile[1]} states a column" if tile
            else "cols")
    note = f"{note}: {lay.n} x {lay.r}, {plan}" + (f", {splits} splits" if splits > 1 else "")
    if pro is not None:
        note += f", prologue {' -> '.join(pro.ops) or 'copy'} (not stored)"
    source = f"""{_header()}
// {name}: {note}
using {name}_op = {spec.cpp};
{_ix_source(name, lay)}
{pro.loader(f"{name}_ld") if pro is not None else ""}
{launchers(name, raw, casts, launch, host)}"""
    return Kernel(
        name=name,
        inputs=inputs,
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
    return (src, out, *_along_layout(ctx, src))


def _along_layout(ctx: EmitContext, src: Operand) -> tuple[Layout, int]:
    rank = len(src.shape)
    dim = ctx.args.get("dim")
    if type(dim) is not int or not -max(rank, 1) <= dim < max(rank, 1):
        raise NotSupported(f"dim={dim!r}")
    if rank == 0:
        return Layout((), (), src.offset, 1, 1), 1
    dim %= rank
    dims = list(zip(src.shape, src.strides, strict=True))
    kept = _merge(dims[:dim] + dims[dim + 1 :])
    red = ((src.shape[dim], src.strides[dim]),)
    inner = math.prod(src.shape[dim + 1 :])
    return Layout(kept, red, src.offset, math.prod(n for n, _ in kept), src.shape[dim]), inner


def _along_kernel(
    ctx: EmitContext, src: Operand, out: OutSpec, lay: Layout, launch: str, host: str, note: str,
    ep: Epilogue | None = None,
) -> Kernel:
    name = ctx.name
    raw = ["const void* in0_", *_ep_params(ep, 1), "void* out0_"]
    casts = [
        f"  const auto x = static_cast<const {C_TYPES[src.dtype]}*>(in0_);",
        f"  const auto y = static_cast<{C_TYPES[out.dtype]}*>(out0_);",
        *_ep_cast(ctx.name, ep, 1),
    ]
    loop = f"  for (int64_t o = 0; o < {name}_ix::N; ++o) {host};"
    source = f"""{_header()}
// {name}: {note}
{_ix_source(name, lay)}
{ep.functor(f"{name}_ep") if ep is not None else ""}
{launchers(name, raw, casts, launch, loop)}"""
    return Kernel(
        name=name,
        inputs=[KernelArg(src.name, src.dtype), *(ep.inputs if ep is not None else [])],
        outputs=[KernelArg(out.name, out.dtype)],
        source=source,
        ops=[note],
        host=True,
    )


# A softmax's epilogue (planner._take_epilogues): the pointwise ops after it, computed as it stores,
# their end stored in its place. Its inputs follow the softmax's own operand(s) among the launcher's
# parameters; the kernels take it as their last argument (`ep`), `sc_red_no_ep` without one.
def _softmax_epilogue(ctx: EmitContext, out: OutSpec) -> tuple[Epilogue | None, OutSpec]:
    ep = ctx.epilogue
    # The chain may read the result through a reshape (element e is e either way: the planner's
    # epilogue reads through views that keep every element where it is).
    if ep is None or ep.value != out.name or math.prod(ep.shape) != math.prod(out.shape):
        return None, out
    return ep, OutSpec(ep.node, tuple(ep.shape), ep.dtype)


def _ep_params(ep: Epilogue | None, first: int) -> list[str]:
    return [f"const void* in{first + k}" for k in range(len(ep.inputs))] if ep is not None else []


def _ep_cast(name: str, ep: Epilogue | None, first: int) -> list[str]:
    return [f"  const auto ep = {ep.construct(f'{name}_ep', first)};"] if ep is not None else []


def _ep_arg(ep: Epilogue | None) -> str:
    return ", ep" if ep is not None else ""


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

# A softmax over any dim may join a convolution's channels-last tail (planner._pointwise_tail; only
# the channels' softmax did), and columns of 32 or more neighbouring outputs are split over warps
# (sc_softmax_cols_split). On by default since the H100's A/B (2026-12-06, 6f0fb82: level 2's 13
# 1.09x, bench/coverage's soft_moe_dispatch_combine 2.31x and flip_tta_segmentation 1.07x, the
# other three within 0.5%); STITCHCUDA_LAYOUT_SOFTMAX=0 keeps such a softmax's convolutions NCHW.
LAYOUT_SOFTMAX_ENV = "STITCHCUDA_LAYOUT_SOFTMAX"
_SPLIT_WARPS = 8


def layout_softmax() -> bool:
    return os.environ.get(LAYOUT_SOFTMAX_ENV, "1") != "0"


def _split_columns(lay: Layout, inner: int) -> bool:
    """Whether a column softmax runs split over warps: under the switch, 32 or more neighbouring
    outputs (a warp's loads coalesced) and rows long enough to share among the warps."""
    return layout_softmax() and inner >= 32 and lay.r >= 2 * _SPLIT_WARPS


def _softmax(ctx: EmitContext, op: str) -> Kernel:
    src, out, lay, inner = _along(ctx)
    _floats(src, out)
    ep, out = _softmax_epilogue(ctx, out)
    _floats(src, out)  # the epilogue's end too (a comparison's bool is not stored by these kernels)
    name, flag = ctx.name, str(_SOFTMAX_MODES[op])
    rows = inner == 1 and lay.r >= 8 and (lay.contig or _few_columns(lay, ctx.target))
    strided = rows and not lay.contig
    note = f"{ctx.node.get('target')} {list(src.shape)} dim {ctx.args.get('dim')}: {lay.n} x {lay.r}"
    if ctx.prologue is not None and ctx.prologue.node == src.name:
        return _softmax_prologue(ctx, ctx.prologue, out, lay, inner, flag, rows, note + (", strided" if strided else ""), ep)
    note_ep = f", epilogue {' -> '.join(ep.ops) or 'copy'}" if ep is not None else ""
    host = f"sc_softmax_col<{name}_ix, {flag}, {inner}LL>(x, y, o{_ep_arg(ep)})"
    if not rows and _split_columns(lay, inner):
        blocks = -(-lay.n // 32)
        launch = (f"  sc_softmax_cols_split<{name}_ix, {flag}, {inner}LL, {_SPLIT_WARPS}><<<{blocks}, "
                  f"{32 * _SPLIT_WARPS}, 0, stream>>>(x, y{_ep_arg(ep)});")
        return _along_kernel(ctx, src, out, lay, launch, host, note + f", cols split over {_SPLIT_WARPS} warps" + note_ep,
                             ep)
    if not rows:
        blocks = -(-lay.n // BLOCK)
        launch = f"  sc_softmax_cols<{name}_ix, {flag}, {inner}LL><<<{blocks}, {BLOCK}, 0, stream>>>(x, y{_ep_arg(ep)});"
        return _along_kernel(ctx, src, out, lay, launch, host, note + ", cols" + note_ep, ep)
    if strided:
        # A warp a row, reading it where the view puts it; its elements two passes apart in L2.
        tpr = 32
        grid = f"<<<{-(-lay.n // (max(tpr, BLOCK) // tpr))}, {max(tpr, BLOCK)}, 0, stream>>>(x, y{_ep_arg(ep)});"
        launch = f"  sc_softmax_rows<{name}_ix, {flag}, 1, 1, {tpr}>{grid}"
        return _along_kernel(ctx, src, out, lay, launch, host, note + f", strided rows two passes tpr {tpr}" + note_ep, ep)
    vec = _vec_choice(lay, src, out, inner)
    cached = next((t for t, cap in ((32, 32), (256, 32), (512, 32)) if lay.r <= t * cap), None)
    cached = _short_tpr(lay.r, vec) if cached == 32 else cached
    tpr = cached or 512
    bs = max(tpr, BLOCK)
    grid = f"<<<{-(-lay.n // (bs // tpr))}, {bs}, 0, stream>>>(x, y{_ep_arg(ep)});"
    if cached:

        def kernel(v: int) -> str:
            return f"sc_softmax_rows_reg<{name}_ix, {flag}, {v}, {tpr}, {-(-lay.r // (tpr * v))}>{grid}"

        note += f", rows in registers tpr {tpr} vec {vec}"
    else:
        load = 16 // ITEM_SIZE[src.dtype]

        def kernel(v: int) -> str:
            return f"sc_softmax_rows<{name}_ix, {flag}, {load}, {v}, {tpr}>{grid}"

        note += f", rows two passes tpr {tpr} vec {vec}"
    return _along_kernel(ctx, src, out, lay, _pick(vec, kernel), host, note + note_ep, ep)


def _few_columns(lay: Layout, target: Target) -> bool:
    """Whether a softmax along strided rows (a transposed view's: CLIP's cross entropy of logits.t())
    has too few rows for a thread each to fill a quarter of the target's resident threads: a warp a
    row then. A thread a row took 506 us for 1,024 rows of 1,024 on the H200 (bench/coverage's
    clip_loss, 0.62x torch.compile)."""
    return lay.n * 4 < target.sm_count * target.max_threads_per_sm


def _softmax_prologue(ctx: EmitContext, pro: Prologue, out: OutSpec, lay: Layout, inner: int, flag: str,
                      rows: bool, note: str, ep: Epilogue | None = None) -> Kernel:
    """Softmax whose operand is computed as it is read (both passes), never stored."""
    name = ctx.name
    first = len(pro.inputs)
    raw = [*pro.params(), *_ep_params(ep, first), "void* out0_"]
    casts = [f"  const auto x = {pro.construct(f'{name}_ld')};", f"  const auto y = static_cast<{C_TYPES[out.dtype]}*>(out0_);",
             *_ep_cast(name, ep, first)]
    e = _ep_arg(ep)
    host = f"  for (int64_t o = 0; o < {name}_ix::N; ++o) sc_softmax_col_ld<{name}_ix, {flag}, {inner}LL>(x, y, o{e});"
    if rows:
        # The loader's vectors where its inputs, y and every row start allow them (lay.contig: rows
        # are contiguous and R elements apart).
        vec = _loader_vec(pro) if lay.contig else 1
        # (every row's start a multiple of vec, as the second pass reads vectors from it: a slice's
        # offset or an odd row stride would misalign each of them; a review, 2026-12-01)
        vec = min(vec, 16 // ITEM_SIZE[out.dtype]) if lay.r % vec == 0 and lay.aligned(vec) else 1
        tpr = _short_tpr(lay.r, vec) if lay.r <= 2048 else 256
        bs = max(tpr, BLOCK)
        grid = f"<<<{-(-lay.n // (bs // tpr))}, {bs}, 0, stream>>>(x, y{e});"
        launch = f"  sc_softmax_rows_ld<{name}_ix, {flag}, {tpr}>{grid}"
        if vec > 1:
            launch = (f"  if (x.aligned({vec}) && sc_aligned(y, {vec}))\n  sc_softmax_rows_ld<{name}_ix, {flag}, {tpr}, {vec}>"
                      f"{grid}\n  else\n{launch}")
        note += f", rows two passes tpr {tpr} vec {vec}"
    elif _split_columns(lay, inner):
        launch = (f"  sc_softmax_cols_split_ld<{name}_ix, {flag}, {inner}LL, {_SPLIT_WARPS}><<<{-(-lay.n // 32)}, "
                  f"{32 * _SPLIT_WARPS}, 0, stream>>>(x, y{e});")
        note += f", cols split over {_SPLIT_WARPS} warps"
    else:
        launch = f"  sc_softmax_cols_ld<{name}_ix, {flag}, {inner}LL><<<{-(-lay.n // BLOCK)}, {BLOCK}, 0, stream>>>(x, y{e});"
        note += ", cols"
    note += f", prologue {' -> '.join(pro.ops) or 'copy'} (not stored)"
    if ep is not None:
        note += f", epilogue {' -> '.join(ep.ops) or 'copy'}"
    source = f"""{_header()}
// {name}: {note}
{_ix_source(name, lay)}
{pro.loader(f"{name}_ld")}
{ep.functor(f"{name}_ep") if ep is not None else ""}
{launchers(name, raw, casts, launch, host)}"""
    return Kernel(name=name, inputs=[*pro.inputs, *(ep.inputs if ep is not None else [])],
                  outputs=[KernelArg(out.name, out.dtype)], source=source, ops=[note], host=True)


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


# A scan's combining operation in reduce.cuh (sc_scan_op): cumsum, cumprod, logcumsumexp.
SCAN_OPS = {"sum": "SC_SCAN_SUM", "prod": "SC_SCAN_PROD", "lse": "SC_SCAN_LSE"}


def _scan(ctx: EmitContext, op: str) -> Kernel:
    src, out, lay, inner = _along(ctx)
    _dtype_ok(src, out, ctx.args.get("dtype"))
    name, flag, prod = ctx.name, SCAN_OPS[op], op == "prod"
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


def _running_extreme(ctx: EmitContext, op: str) -> Kernel:
    """torch.cummax and torch.cummin, values and indices (either alone where the other is unread), a
    thread a scan line: ATen's rule is sequential (a later equal value, and any NaN, takes over), and
    the running peaks and drawdowns of user modules scan short lines."""
    src = _source(ctx)
    values, indices = (list(ctx.outputs) + [None, None])[:2]
    if src.dtype not in FLOATS:
        raise NotSupported(f"{op} of {src.dtype}")
    for out, dtype in ((values, src.dtype), (indices, "int64")):
        if out is not None and (tuple(out.shape) != tuple(src.shape) or out.dtype != dtype):
            raise NotSupported(f"{op} result {out.name}: {list(out.shape)} {out.dtype}")
    if values is None and indices is None:
        raise NotSupported(f"{op}: no result is read")
    lay, inner = _along_layout(ctx, src)
    if lay.n * lay.r == 0:
        raise NotSupported(f"{op} of an empty tensor")
    name, t = ctx.name, C_TYPES[src.dtype]
    outs = [o for o in (values, indices) if o is not None]
    raw = ["const void* in0_", *[f"void* out{k}_" for k in range(len(outs))]]
    casts = [f"  const auto x = static_cast<const {t}*>(in0_);",
             f"  {t}* y = {'static_cast<' + t + '*>(out0_)' if values is not None else 'nullptr'};",
             f"  int64_t* idx = {'static_cast<int64_t*>(out' + str(len(outs) - 1) + '_)' if indices is not None else 'nullptr'};"]
    mx = "true" if op == "cummax" else "false"
    launch = (f"  sc_cumext_cols<{name}_ix, {mx}, {inner}LL><<<{-(-lay.n // BLOCK)}, {BLOCK}, 0, stream>>>(x, y, idx);")
    loop = f"  for (int64_t o = 0; o < {name}_ix::N; ++o) sc_cumext_col<{name}_ix, {mx}, {inner}LL>(x, y, idx, o);"
    note = f"{ctx.node.get('target')} {list(src.shape)} dim {ctx.args.get('dim')}: {lay.n} lines of {lay.r}, a thread a line"
    source = f"""{_header()}
// {name}: {note}
{_ix_source(name, lay)}
{launchers(name, raw, casts, launch, loop)}"""
    return Kernel(name=name, inputs=[KernelArg(src.name, src.dtype)], outputs=[KernelArg(o.name, o.dtype) for o in outs],
                  source=source, ops=[note], host=True)


# ---------------------------------------------------------------------------------------------

Emitter = Callable[[EmitContext], Kernel]

# Ops whose operand may be a Prologue: the reductions, and softmax (its two passes both compute it:
# cheaper than a pass that stores it and two that read it). Not the scans.
PROLOGUE_OPS = frozenset({"sum", "nansum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin",
                          "logsumexp", "var", "std", "var_mean", "std_mean", "linalg_vector_norm", "norm",
                          "_softmax", "_log_softmax", "_safe_softmax",
                          # emit_norm's (training-mode statistics; eval batch norm is pointwise already)
                          "native_layer_norm", "native_group_norm", "native_batch_norm", "sc_dim_norm",
                          "_native_batch_norm_legit", "_native_batch_norm_legit_functional", "_fused_rms_norm",
                          # emit_pool's: each window computes what it reads (overlapping windows again)
                          *(f"{kind}_pool{nd}d" for kind in ("max", "avg") for nd in (1, 2, 3)),
                          *(f"max_pool{nd}d_with_indices" for nd in (1, 2, 3)),
                          *(f"{p}adaptive_{kind}_pool{nd}d" for p in ("", "_") for kind in ("max", "avg")
                            for nd in (1, 2, 3)),
                          # emit_scatter's: `self` (the zeros messages are summed into) computed as copied
                          "index_add", "scatter_add", "scatter_reduce"})


def prologue_operand(node: dict[str, Any]) -> str:
    """The argument holding the operand a prologue stands for: `input` for the norms, else `self`."""
    return "input" if "input" in node.get("args", {}) else "self"

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
    "cumsum": partial(_scan, op="sum"),
    "cumprod": partial(_scan, op="prod"),
    "logcumsumexp": partial(_scan, op="lse"),
    "cummax": partial(_running_extreme, op="cummax"),
    "cummin": partial(_running_extreme, op="cummin"),
}


# The reductions a sibling pair may hold, by op: _reduction's kinds.
REDUCTION_KINDS: dict[str, str] = {op: fn.keywords["kind"] for op, fn in EMITTERS.items() if fn.func is _reduction}


def emit_siblings(
    graph: Sequence[dict[str, Any]], names: Sequence[str], kernel_name: str,
    operands: Sequence[tuple[Sequence[str], str]], **options: Any,
) -> Kernel:
    """One kernel for reductions `names` (two), each reading its operand (members, node: a
    prologue's chain, or no members for a stored tensor) through one loader; NotSupported or
    codegen.NotFusable where they cannot be one. `options` are kernels.context()'s."""
    from stitchcuda.agents.coder.codegen import prologue_pair
    from stitchcuda.agents.coder.kernels import context

    if len(names) != 2 or len(operands) != 2:
        raise NotSupported("a sibling pair is two reductions")
    ctxs = [context(graph, n, kernel_name, **options) for n in names]
    kinds = [REDUCTION_KINDS.get(c.node["op"]) for c in ctxs]
    if None in kinds:
        raise NotSupported("a sibling pair is two reductions")
    for ctx, (_, root) in zip(ctxs, operands, strict=True):
        src = _source(ctx)
        if src.name != root:  # (the loader computes the operand's own storage)
            raise NotSupported(f"{ctx.node['name']} reads {src.name}, not {root}")
        if src.dtype != ctx.nodes[root].get("dtype"):  # (a dtype view: the loader reads root's own type)
            raise NotSupported(f"{ctx.node['name']} reads {root} as {src.dtype}")
    pro = prologue_pair(graph, operands[0], operands[1], nodes=ctxs[0].nodes)
    return sibling_pair(ctxs[0], kinds[0] or "", ctxs[1], kinds[1] or "", pro)
