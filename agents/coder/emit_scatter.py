"""Scatter-adds: `index_add` (x.index_add_(dim, index, source, alpha=a), a graph network's messages
summed at their target nodes) and `scatter_add` (x.scatter_add(dim, index, src), PyG's scatter); and
`scatter` (x.scatter(dim, index, src or value): a mixture of experts' combine weights written at the
router's top-k experts, a one-hot built by hand), whose elements are stored, not added: where two
name one target PyTorch leaves which one lands undefined, and so does the kernel. `scatter_reduce`
(sum, prod, amax, amin; a graph attention layer's per-node maximum of its edges' scores before their
softmax) and scatter's legacy `reduce=` ("add", "multiply") combine instead, each by its own atomic:
max and min by compare-and-swap loops that keep a NaN as PyTorch's do. Without `include_self` a
third pass first writes the reduction's identity at every target, so only the sources combine there.

The result is `self`, then every source element added where its index sends it. Several source
elements may name one target, so the adds are atomic on the GPU (fp32 only: atomicAdd). Their order
is not PyTorch's, which sums in its own order too; the difference is fp32 rounding of each sum.
Two grid-stride passes share one launcher: the copy of `self`, then the adds; the `NAME_host` entry
runs the same per-element functions serially, for tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from stitchcuda.agents.coder.codegen import C_TYPES, THREADS, KernelArg, c_float
from stitchcuda.agents.coder.emit_layout import WRAP_INDEX, coords_of, offset_of
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, launchers

# The argument holding the values added (the planner reads it too: planner._take_gathered_sources).
SOURCE_ARG = {"index_add": "source", "scatter_add": "src", "scatter": "src", "scatter_reduce": "src"}

# How each reduction combines a source element into its target: (the device function, its identity).
# A store has neither (scatter without reduce).
COMBINE = {
    "sum": ("sc_scatter_add", "0.0f"),
    "prod": ("sc_scatter_mul", "1.0f"),
    "amax": ("sc_scatter_max", "-INFINITY"),
    "amin": ("sc_scatter_min", "INFINITY"),
}
LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}  # scatter(..., reduce=) (scatter.reduce / value_reduce)

# The atomic add, once per translation unit (fp32: atomicAdd; the CPU entry adds in order).
_ADD = """#ifndef SC_SCATTER_ADD
#define SC_SCATTER_ADD
SC_INLINE void sc_scatter_add(float* at, float v) {
#ifdef __CUDA_ARCH__
  atomicAdd(at, v);
#else
  *at += v;
#endif
}
#endif
"""

# The atomics, once per translation unit. Max and min compare as floats (a NaN, once there or sent,
# stays, as torch.maximum's does), so they retry by compare-and-swap rather than use integer atomics.
_ATOMICS = """#ifndef SC_SCATTER_ATOMICS
#define SC_SCATTER_ATOMICS
#ifdef __CUDA_ARCH__
#define SC_CAS_LOOP(at, keep, next)                                              \\
  int* p_ = reinterpret_cast<int*>(at);                                        \\
  int seen_ = *p_, was_;                                                       \\
  do {                                                                         \\
    was_ = seen_;                                                              \\
    const float cur = __int_as_float(was_);                                    \\
    if (keep) break;                                                           \\
    seen_ = atomicCAS(p_, was_, __float_as_int(next));                         \\
  } while (seen_ != was_);
#else
#define SC_CAS_LOOP(at, keep, next) { const float cur = *(at); if (!(keep)) *(at) = (next); }
#endif
SC_INLINE void sc_scatter_mul(float* at, float v) { SC_CAS_LOOP(at, false, cur * v) }
SC_INLINE void sc_scatter_max(float* at, float v) { SC_CAS_LOOP(at, cur >= v || cur != cur, v) }
SC_INLINE void sc_scatter_min(float* at, float v) { SC_CAS_LOOP(at, cur <= v || cur != cur, v) }
#endif
"""


def _dense(shape: Sequence[int], coords: Sequence[str]) -> str:
    """The row-major offset of `coords` in a contiguous tensor of `shape`."""
    at = coords[0]
    for d in range(1, len(shape)):
        at = f"({at}) * {shape[d]}LL + {coords[d]}"
    return at


def _scatter(ctx: EmitContext) -> Kernel:
    op = ctx.node["op"]
    out = ctx.outputs[0]
    a = ctx.args
    self_, index = a.get("self"), a.get("index")
    source = a.get(SOURCE_ARG[op])
    # scatter.value: one number stored at every index (the index's shape stands for the source's).
    number = a.get("value") if op == "scatter" and source is None else None
    if number is not None and (not isinstance(number, int | float) or isinstance(number, bool)):
        raise NotSupported(f"{op}: value {number!r}")
    if out is None:
        raise NotSupported(f"{op}: result unused")
    reduce = a.get("reduce")
    if op == "scatter" and reduce is not None:
        if reduce not in LEGACY_REDUCE:
            raise NotSupported(f"{op}: reduce={reduce!r}")
        reduce = LEGACY_REDUCE[reduce]
    elif op in ("index_add", "scatter_add"):
        reduce = "sum"
    if reduce is not None and reduce not in COMBINE:
        raise NotSupported(f"{op}: reduce={reduce!r} (a mean needs each target's count)")
    # Without include_self a target any source names starts from the reduction's identity.
    reset = op == "scatter_reduce" and a.get("include_self", True) is False
    if not all(isinstance(t, Operand) for t in (self_, index)) or not (isinstance(source, Operand) or number is not None):
        raise NotSupported(f"{op}: tensors only")
    assert isinstance(self_, Operand) and isinstance(index, Operand)
    if number is not None:
        source = Operand(index.name, index.shape, index.strides, index.offset, "float32")
    assert isinstance(source, Operand)
    # A plain store (scatter without reduce) moves values of any dtype as they are (a bool mask put
    # back in vocabulary order after a sort: top-p sampling); reductions combine fp32 by atomics.
    vt = self_.dtype
    stores_any = reduce is None and number is None and {self_.dtype, source.dtype, out.dtype} == {vt} and vt in C_TYPES
    if index.dtype != "int64" or not (stores_any or {self_.dtype, source.dtype, out.dtype} == {"float32"}):
        raise NotSupported(f"{op}: int64 indices, and fp32 values where it reduces (atomics)")
    ctype = C_TYPES[vt]
    rank = len(out.shape)
    if len(source.shape) != rank or tuple(self_.shape) != tuple(out.shape) or rank == 0:
        raise NotSupported(f"{op}: source and result ranks differ")
    dim = int(a.get("dim", 0)) % rank
    alpha = a.get("alpha", 1)
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        raise NotSupported(f"{op}: alpha {alpha!r}")
    src_coords = [f"c{d}" for d in range(rank)]
    if op == "index_add":
        if len(index.shape) != 1 or index.shape[0] != source.shape[dim] or any(
                source.shape[d] != out.shape[d] for d in range(rank) if d != dim):
            raise NotSupported("index_add: a 1-D index as long as the source's dim, the other dims the result's")
        row = f"sc_wrap_index(ix[{offset_of(index, [src_coords[dim]])}], {out.shape[dim]}LL)"
    else:
        if any(index.shape[d] > source.shape[d] for d in range(rank)) or len(index.shape) != rank \
                or any(index.shape[d] > out.shape[d] for d in range(rank) if d != dim):
            raise NotSupported(f"{op}: an index no larger than the source, within the result's other dims")
        row = f"sc_wrap_index(ix[{offset_of(index, src_coords)}], {out.shape[dim]}LL)"
    target = list(src_coords)
    target[dim] = "t"
    # Messages picked from a table (x[src]): read through their index here, never gathered first.
    g = ctx.gathers.get(source.name) if number is None and vt == "float32" else None
    if g is not None and not (source.contiguous and g.table.dtype == "float32" and len(g.table.shape) == rank
                              and g.index.shape[0] == source.shape[g.dim]
                              and all(g.table.shape[d] == source.shape[d] for d in range(rank) if d != g.dim)):
        g = None
    if number is not None:
        read = c_float(float(number))
    elif g is None:
        read = f"src[{offset_of(source, src_coords)}]"
    else:
        at = list(src_coords)
        at[g.dim] = f"sc_wrap_index(gx[{offset_of(g.index, [src_coords[g.dim]])}], {g.table.shape[g.dim]}LL)"
        read = f"src[{offset_of(g.table, at)}]"
    value = read + (f" * {c_float(float(alpha))}" if alpha != 1 else "")
    n_out = 1
    for s in out.shape:
        n_out *= s
    n_src = 1  # the elements sent: the index's (PyTorch reads as much of the source as the index covers)
    walked = index.shape if op != "index_add" else source.shape
    for s in walked:
        n_src *= s
    name = ctx.name
    out_coords = [f"c{d}" for d in range(rank)]
    # `self` computed as it is copied (the planner's prologue: the zeros a graph network sums into).
    pro = ctx.prologue if ctx.prologue is not None and ctx.prologue.node == self_.name and self_.contiguous \
        and tuple(ctx.prologue.shape) == tuple(self_.shape) and vt == "float32" else None
    # (A prologue takes the row-major index itself: no coordinates to split.)
    copy_lines = ["y[o] = ld(o);"] if pro else [*coords_of(out.shape, "o"), f"y[o] = x[{offset_of(self_, out_coords)}];"]
    copy_body = "\n".join(f"  {line}" for line in copy_lines)
    put = (f"y[{_dense(out.shape, target)}] = {value};" if reduce is None
           else f"{COMBINE[reduce][0]}(&y[{_dense(out.shape, target)}], {value});")
    add_body = "\n".join(f"  {line}" for line in [*coords_of(walked, "s"), f"const int64_t t = {row};", put])
    reset_body = "\n".join(f"  {line}" for line in [*coords_of(walked, "s"), f"const int64_t t = {row};",
                                                    f"y[{_dense(out.shape, target)}] = {COMBINE[reduce][1]};"]) \
        if reset and reduce is not None else ""
    head = f"const {name}_ld ld" if pro else f"const {ctype}* __restrict__ x"
    params = (f"{head}, const int64_t* __restrict__ ix, const {ctype}* __restrict__ src, "
              f"const int64_t* __restrict__ gx, {ctype}* __restrict__ y")
    args = f"{'ld' if pro else 'x'}, ix, src, gx, y"
    # Launcher pointers: self (or its prologue's inputs), the index, the source (or the gather's
    # table and index), the result.
    firsts = list(pro.inputs) if pro else [KernelArg(self_.name, vt)]
    ins = [*firsts, KernelArg(index.name, "int64")] + (
        [KernelArg(g.table.name, "float32"), KernelArg(g.index.name, "int64")] if g
        else [] if number is not None else [KernelArg(source.name, vt)])
    raw = [f"const void* in{k}_" for k in range(len(ins))] + ["void* out0_"]
    k0 = len(firsts)
    casts = [f"  const auto ld = {pro.construct(f'{name}_ld')};" if pro else f"  const auto x = static_cast<const {ctype}*>(in0_);"]
    casts += [f"  const auto ix = static_cast<const int64_t*>(in{k0}_);",
              f"  const {ctype}* src = nullptr;" if number is not None else f"  const auto src = static_cast<const {ctype}*>(in{k0 + 1}_);",
              f"  const auto gx = static_cast<const int64_t*>(in{k0 + 2}_);" if g else "  const int64_t* gx = nullptr;",
              f"  const auto y = static_cast<{ctype}*>(out0_);"]
    # The passes in launch order: (stage, its element count, its body, what it leaves unread).
    kept = "ld" if pro else "x"
    passes = [("copy", n_out, copy_body, "(void)ix; (void)src; (void)gx;"),
              *([("reset", n_src, reset_body, f"(void){kept}; (void)src; (void)gx;")] if reset_body else []),
              ("add", n_src, add_body, f"(void){kept}; (void)src; (void)gx;")]
    device = "\n".join(f"  {'' if stage == 'copy' else f'if ({count}LL > 0) '}{name}_{stage}"
                       f"<<<sc_grid({count}LL), {THREADS}, 0, stream>>>({args});" for stage, count, _, _ in passes)
    host = "\n".join(f"  for (int64_t e = 0; e < {count}LL; ++e) {name}_{stage}_one(e, {args});"
                     for stage, count, _, _ in passes)
    kernels_text = "\n".join(_grid_pass(name, stage, count, body, unread, params, args)
                             for stage, count, body, unread in passes)
    source_text = f"""
// {name}: {op} along dim {dim} of {list(source.shape)} into {list(out.shape)}
{WRAP_INDEX}{_ADD}{_ATOMICS if reduce in ("prod", "amax", "amin") else ""}
{pro.loader(f"{name}_ld") if pro else ""}
{kernels_text}
{launchers(name, raw, casts, device, host)}"""
    return Kernel(
        name=name,
        inputs=ins,
        outputs=[KernelArg(out.name, vt)],
        source=source_text,
        ops=[f"{op} along dim {dim}: {list(walked)} into {list(out.shape)} ("
             + ("stores" if reduce is None else "atomic adds" if reduce == "sum" else f"atomic {reduce}")
             + (", targets reset to its identity first (include_self=False)" if reset_body else "")
             + (f", the source's rows read through its index along dim {g.dim}" if g else "")
             + (f", self computed as copied: {' -> '.join(pro.ops) or 'copy'}" if pro else "") + ")"],
        host=True,
    )


def _grid_pass(name: str, stage: str, count: int, body: str, unread: str, params: str, args: str) -> str:
    """One pass: its element function (the CPU entry calls it serially) and a grid-stride kernel over
    `count` elements. `body` reads its element's index from the variable its stage names (`o` for
    the copy over the result, `s` over the sources)."""
    var = "o" if stage == "copy" else "s"
    return f"""
SC_INLINE void {name}_{stage}_one(int64_t {var}, {params}) {{
{body}
  {unread}
}}

__global__ void __launch_bounds__({THREADS}) {name}_{stage}({params}) {{
  for (int64_t {var} = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; {var} < {count}LL; {var} += (int64_t)gridDim.x * blockDim.x)
    {name}_{stage}_one({var}, {args});
}}
"""


def _histc(ctx: EmitContext) -> Kernel:
    """torch.histc over a fixed range: the bins zeroed, then each element in [min, max] counted into
    its bin by an atomic add (counts are whole numbers in fp32: exact in any order), binned as
    PyTorch's CUDA kernel bins, in fp32: (x - min) * bins / (max - min), the top edge in the last
    bin; values outside the range, and NaN, are left out."""
    x, out = ctx.args.get("self"), (ctx.outputs or [None])[0]
    bins, lo, hi = ctx.args.get("bins", 100), ctx.args.get("min", 0), ctx.args.get("max", 0)
    if not isinstance(x, Operand) or x.dtype != "float32" or out is None or out.dtype != "float32":
        raise NotSupported("histc of a tensor other than float32")
    if type(bins) is not int or bins < 1 or tuple(out.shape) != (bins,):
        raise NotSupported(f"histc's bins={bins!r}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)) or not lo < hi:
        # (min == max takes the range from the data: its values, which the plan cannot know)
        raise NotSupported(f"histc's range min={lo!r}, max={hi!r} (a fixed range, min < max)")
    name, n = ctx.name, x.numel
    low, high = c_float(lo), c_float(hi)
    params = "const float* __restrict__ x, float* __restrict__ y"
    count = "\n".join([*(f"  {line}" for line in coords_of(x.shape, "s")),
                       f"  const float v = x[{offset_of(x, [f'c{d}' for d in range(len(x.shape))])}];",
                       f"  if (v >= {low} && v <= {high}) {{",
                       f"    int b = (int)((v - {low}) * (float){bins}LL / ({high} - {low}));",
                       f"    if (b == {bins}) b -= 1;",
                       "    sc_scatter_add(&y[b], 1.0f);",
                       "  }"])
    passes = [("zero", bins, "  y[s] = 0.0f;", "(void)x;"), ("count", n, count, "")]
    device = "\n".join(f"  if ({c}LL > 0) {name}_{stage}<<<sc_grid({c}LL), {THREADS}, 0, stream>>>(x, y);"
                       for stage, c, _, _ in passes)
    host = "\n".join(f"  for (int64_t e = 0; e < {c}LL; ++e) {name}_{stage}_one(e, x, y);" for stage, c, _, _ in passes)
    kernels_text = "\n".join(_grid_pass(name, stage, c, body, unread, params, "x, y") for stage, c, body, unread in passes)
    casts = ["  const auto x = static_cast<const float*>(in0);", "  const auto y = static_cast<float*>(out0);"]
    source = f"""
// {name}: histc of {list(x.shape)} into {bins} bins over [{lo}, {hi}]
{_ADD}{kernels_text}
{launchers(name, ["const void* in0", "void* out0"], casts, device, host)}"""
    return Kernel(name=name, inputs=[KernelArg(x.name, "float32")], outputs=[KernelArg(out.name, "float32")],
                  source=source, ops=[f"histc of {n} elements into {bins} bins (atomic adds)"], host=True)


EMITTERS = {"index_add": _scatter, "scatter_add": _scatter, "scatter": _scatter, "scatter_reduce": _scatter,
            "histc": _histc}
