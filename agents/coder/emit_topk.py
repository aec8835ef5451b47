"""torch.topk (aten.topk): the k largest or smallest values along one dim and their indices, sorted,
a warp a row (cuda/topk.cuh). For routers (a mixture of experts picks its top 2 of 8), k-nearest
neighbours (DGCNN's and PointNet++'s 20 of a few thousand) and beam heads: k up to MAX_K.

Ties go to the lower index and NaN counts as the largest value. PyTorch's CUDA topk leaves the order
of equal values unspecified, so only ties can differ from it."""

from __future__ import annotations

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, KernelArg
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, launchers

MAX_K = 32  # a lane keeps k candidates in registers (local memory beyond)
FLOATS = ("float32", "float16", "bfloat16")
WARPS = 8  # rows a block takes at once


def emit_topk(ctx: EmitContext) -> Kernel:
    x = ctx.args.get("self")
    if not isinstance(x, Operand) or x.dtype not in FLOATS:
        raise NotSupported("topk of a non-float tensor")
    rank = len(x.shape)
    dim = ctx.args.get("dim", -1)
    k = ctx.args.get("k")
    if type(dim) is not int or type(k) is not int or rank == 0:
        raise NotSupported("topk's k and dim")
    dim %= rank
    n = x.shape[dim]
    if not 0 < k <= min(n, MAX_K):
        raise NotSupported(f"topk of {k} of {n} (at most {MAX_K})")
    if ctx.args.get("sorted", True) is not True:
        raise NotSupported("topk(sorted=False)")  # PyTorch's unsorted order is its own
    largest = bool(ctx.args.get("largest", True))
    values, indices = (list(ctx.outputs) + [None, None])[:2]
    want = tuple(k if d == dim else s for d, s in enumerate(x.shape))
    for out, dtype in ((values, x.dtype), (indices, "int64")):
        if out is not None and (tuple(out.shape) != want or out.dtype != dtype):
            raise NotSupported(f"topk result {out.name}: {list(out.shape)} {out.dtype}")
    if values is None and indices is None:
        raise NotSupported("topk: no result is read")
    rows = 1
    for d, s in enumerate(x.shape):
        rows *= s if d != dim else 1
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    # Row r's first element, from the coordinates of r over the other dims (the operand's strides).
    others = [d for d in range(rank) if d != dim]
    lines = ["long long q = r, off = " + str(x.offset) + ";"]
    for d in reversed(others):
        lines.append(f"off += (q % {x.shape[d]}LL) * {x.strides[d]}LL; q /= {x.shape[d]}LL;")
    body = "\n  ".join(lines)
    t = C_TYPES[x.dtype]
    name = ctx.name
    outs = [(o, f"out{i}") for i, o in enumerate(o for o in (values, indices) if o is not None)]
    vals_ptr = f"static_cast<{t}*>({outs[0][1]})" if values is not None else "nullptr"
    idx_ptr = f"static_cast<long long*>({outs[-1][1]})" if indices is not None else "nullptr"
    lg = "true" if largest else "false"
    source = cuda_text.load("topk.cuh") + f"""
// {name}: topk {k} {'largest' if largest else 'smallest'} of {n} along dim {dim} of {list(x.shape)}
SC_INLINE long long {name}_row(long long r) {{
  {body}
  return off;
}}
// Result t of row r: rows are (outer, inner) pairs of the contiguous result, k apart along dim.
SC_INLINE long long {name}_out(long long r, int t) {{
  return (r / {inner}LL) * ({k}LL * {inner}LL) + t * {inner}LL + r % {inner}LL;
}}
#ifdef __CUDACC__
__global__ void __launch_bounds__({WARPS * 32}) {name}_kernel(const {t}* __restrict__ x, {t}* vals, long long* idx) {{
  for (long long r = (long long)blockIdx.x * {WARPS} + threadIdx.x / 32; r < {rows}LL; r += (long long)gridDim.x * {WARPS}) {{
    const long long base = {name}_row(r);
    sc_topk_list<{k}, {lg}> list;
    sc_topk_scan<{k}, {lg}>(list, x, base, {x.strides[dim]}LL, threadIdx.x & 31, 32, {n}LL);
    sc_topk_warp_merge<{k}, {lg}>(list, [&](int t, float v, long long i) {{
      if (vals) vals[{name}_out(r, t)] = sc_from_f<{t}>(v);
      if (idx) idx[{name}_out(r, t)] = i;
    }});
  }}
}}
#endif
"""
    raw = ["const void* in0", *[f"void* {p}" for _, p in outs]]
    casts = [f"  const auto x = static_cast<const {t}*>(in0);", f"  {t}* vals = {vals_ptr};",
             f"  long long* idx = {idx_ptr};"]
    blocks = min(-(-rows // WARPS), 65535 * 8)
    device = f"  {name}_kernel<<<{blocks}, {WARPS * 32}, 0, stream>>>(x, vals, idx);"
    host = (f"  for (long long r = 0; r < {rows}LL; ++r) {{\n"
            f"    const long long base = {name}_row(r);\n"
            f"    sc_topk_row_host<{k}, {lg}>(x, base, {x.strides[dim]}LL, {n}LL,\n"
            f"        [&](int t, float v, long long i) {{\n"
            f"          if (vals) vals[{name}_out(r, t)] = sc_from_f<{t}>(v);\n"
            f"          if (idx) idx[{name}_out(r, t)] = i;\n"
            f"        }});\n  }}")
    source += launchers(name, raw, casts, device, host)
    return Kernel(
        name=name,
        inputs=[KernelArg(x.name, x.dtype)],
        outputs=[KernelArg(o.name, o.dtype) for o, _ in outs],
        source=source,
        ops=[f"topk {k} {'largest' if largest else 'smallest'} of {n} along dim {dim}, {rows} rows, a warp a row"],
        host=True,
    )


EMITTERS = {"topk": emit_topk}
