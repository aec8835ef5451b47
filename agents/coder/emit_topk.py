"""torch.topk (aten.topk): the k largest or smallest values along one dim and their indices, sorted,
a warp a row (cuda/topk.cuh). For routers (a mixture of experts picks its top 2 of 8), k-nearest
neighbours (DGCNN's and PointNet++'s 20 of a few thousand) and beam heads: k up to MAX_K.

Past MAX_K (token pruning keeps half the tokens), and for torch.sort and torch.argsort, a block sorts
the whole row in shared memory (cuda/row_sort.cuh) and writes its first k: rows of up to MAX_ROW.

torch.median, torch.nanmedian and torch.kthvalue write one entry of the row so sorted. Integer
tensors (int64, int32: Reformer's bucket keys, token indices) sort by the row sort, as themselves.

Ties go to the lower index and NaN counts as the largest value. PyTorch's CUDA topk leaves the order
of equal values unspecified, so only ties can differ from it."""

from __future__ import annotations

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, KernelArg
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, launchers

MAX_K = 32  # a lane keeps k candidates in registers (local memory beyond)
MAX_ROW = 4096  # a row sorted whole: 8 bytes an entry of shared memory, 32 KiB (no opt-in past 48)
SORT_THREADS = 512
FLOATS = ("float32", "float16", "bfloat16")
# A row sort's key in shared memory, and its bytes: floats (half and bfloat16 exactly) as float,
# integers as themselves.
SORT_KEYS = {"float32": ("float", 4), "float16": ("float", 4), "bfloat16": ("float", 4), "int64": ("long long", 8),
             "int32": ("int", 4)}
STATIC_SHARED = 48 << 10  # a block's static shared memory
WARPS = 8  # rows a block takes at once


def _rows(ctx: EmitContext, x: Operand, dim: int, k: int) -> tuple[Operand | None, Operand | None, int, int, str]:
    """(the values and indices results read, either None where unread; how many rows along `dim`;
    the elements after `dim`; the C lines that put row r's first element's offset in `off`), each
    result checked to be `x`'s shape with k along `dim`."""
    values, indices = (list(ctx.outputs) + [None, None])[:2]
    want = tuple(k if d == dim else s for d, s in enumerate(x.shape))
    # One pick a row (median, kthvalue) without keepdim: the dim dropped, the same elements in order.
    squeezed = tuple(s for d, s in enumerate(x.shape) if d != dim) if k == 1 else want
    for out, dtype in ((values, x.dtype), (indices, "int64")):
        if out is not None and (tuple(out.shape) not in (want, squeezed) or out.dtype != dtype):
            raise NotSupported(f"{ctx.node['op']} result {out.name}: {list(out.shape)} {out.dtype}")
    if values is None and indices is None:
        raise NotSupported(f"{ctx.node['op']}: no result is read")
    rows = 1
    for d, s in enumerate(x.shape):
        rows *= s if d != dim else 1
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    # Row r's first element, from the coordinates of r over the other dims (the operand's strides).
    others = [d for d in range(len(x.shape)) if d != dim]
    lines = [("long long q = r, off = " if others else "(void)r; long long off = ") + str(x.offset) + ";"]
    for d in reversed(others):
        lines.append(f"off += (q % {x.shape[d]}LL) * {x.strides[d]}LL; q /= {x.shape[d]}LL;")
    return values, indices, rows, inner, "\n  ".join(lines)


def emit_topk(ctx: EmitContext) -> Kernel:
    x = ctx.args.get("self")
    if not isinstance(x, Operand) or x.dtype not in SORT_KEYS:
        raise NotSupported(f"topk of a {getattr(x, 'dtype', 'non-tensor')} tensor")
    rank = len(x.shape)
    dim = ctx.args.get("dim", -1)
    k = ctx.args.get("k")
    if type(dim) is not int or type(k) is not int or rank == 0:
        raise NotSupported("topk's k and dim")
    dim %= rank
    n = x.shape[dim]
    whole = k > MAX_K or x.dtype not in FLOATS  # (integers: through the row sort alone)
    if not 0 < k <= n or (whole and n > MAX_ROW):
        raise NotSupported(f"topk of {k} of {n} (at most {MAX_K} of floats, or rows of at most {MAX_ROW})")
    if ctx.args.get("sorted", True) is not True:
        raise NotSupported("topk(sorted=False)")  # PyTorch's unsorted order is its own
    largest = bool(ctx.args.get("largest", True))
    if whole:
        return _row_sort(ctx, x, dim, k, largest, f"topk {k} {'largest' if largest else 'smallest'}")
    values, indices, rows, inner, body = _rows(ctx, x, dim, k)
    t = C_TYPES[x.dtype]
    name = ctx.name
    outs = _out_params(values, indices)
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
    blocks = min(-(-rows // WARPS), 65535 * 8)
    device = f"  {name}_kernel<<<{blocks}, {WARPS * 32}, 0, stream>>>(x, vals, idx);"
    host_row = f"sc_topk_row_host<{k}, {lg}>(x, {name}_row(r), {x.strides[dim]}LL, {n}LL,"
    return _kernel(name, x, outs, rows, source, device, host_row,
                   f"topk {k} {'largest' if largest else 'smallest'} of {n} along dim {dim}, {rows} rows, a warp a row")


def _out_params(values: Operand | None, indices: Operand | None) -> list[tuple[Operand, str, str]]:
    """(result, launcher parameter, role) of the values' then the indices' result, each where read."""
    read = [(o, role) for o, role in ((values, "vals"), (indices, "idx")) if o is not None]
    return [(o, f"out{i}", role) for i, (o, role) in enumerate(read)]


def _kernel(name: str, x: Operand, outs: list[tuple[Operand, str, str]], rows: int, source: str, device: str,
            host_row: str, note: str) -> Kernel:
    """The kernel with its launchers: `device` launches it; on the CPU each row r runs `host_row`
    (a call missing its last argument, the function that writes result t of the row)."""
    t = C_TYPES[x.dtype]
    # (outs: the values' then the indices' results, each where read; values of x's dtype, indices int64)
    param = {role: p for _, p, role in outs}
    vals_ptr = f"static_cast<{t}*>({param['vals']})" if "vals" in param else "nullptr"
    idx_ptr = f"static_cast<long long*>({param['idx']})" if "idx" in param else "nullptr"
    raw = ["const void* in0", *[f"void* {p}" for _, p, _ in outs]]
    casts = [f"  const auto x = static_cast<const {t}*>(in0);", f"  {t}* vals = {vals_ptr};",
             f"  long long* idx = {idx_ptr};"]
    host = (f"  for (long long r = 0; r < {rows}LL; ++r) {{\n"
            f"    {host_row}\n"
            f"        [&](int t, auto v, long long i) {{\n"
            f"          if (vals) vals[{name}_out(r, t)] = sc_from_key<{t}>(v);\n"
            f"          if (idx) idx[{name}_out(r, t)] = i;\n"
            f"        }});\n  }}")
    return Kernel(
        name=name,
        inputs=[KernelArg(x.name, x.dtype)],
        outputs=[KernelArg(o.name, o.dtype) for o, _, _ in outs],
        source=source + launchers(name, raw, casts, device, host),
        ops=[note],
        host=True,
    )


def emit_sort(ctx: EmitContext) -> Kernel:
    """torch.sort (stable or not: equal values keep their order either way) and torch.argsort."""
    x = ctx.args.get("self")
    if not isinstance(x, Operand) or x.dtype not in SORT_KEYS or not x.shape:
        raise NotSupported(f"sort of a {getattr(x, 'dtype', 'non-tensor')} tensor")
    dim = ctx.args.get("dim", -1)
    if type(dim) is not int:
        raise NotSupported("sort's dim")
    dim %= len(x.shape)
    if x.shape[dim] > MAX_ROW:
        raise NotSupported(f"sort of rows of {x.shape[dim]} (at most {MAX_ROW})")
    descending = bool(ctx.args.get("descending", False))
    return _row_sort(ctx, x, dim, x.shape[dim], descending, f"sort {'descending' if descending else 'ascending'}")


# Which sorted entry a one-pick row sort writes (row_sort.cuh's sc_row_pick): a fixed position, the
# lower median with NaN winning (torch.median), or the lower median of the values that are not NaN
# (torch.nanmedian).
PICK_RULES = {"at": 0, "median": 1, "nanmedian": 2}


def _row_sort(ctx: EmitContext, x: Operand, dim: int, k: int, largest: bool, what: str,
              pick: tuple[str, int] = ("at", 0)) -> Kernel:
    """Rows along `dim` sorted whole by a block each, k entries of each written (values, indices): the
    first k, or, for one pick a row, the entry `pick` names (a rule of PICK_RULES and a position)."""
    n = x.shape[dim]
    rule, at = PICK_RULES[pick[0]], pick[1]
    if k != 1 and (rule, at) != (0, 0):
        raise AssertionError("a pick writes one entry a row")
    values, indices, rows, inner, body = _rows(ctx, x, dim, k)
    t = C_TYPES[x.dtype]
    name = ctx.name
    pad = 1 << max(1, (n - 1).bit_length())  # the bitonic network's width: a power of two
    kt, key_bytes = SORT_KEYS[x.dtype]
    if pad * (key_bytes + 4) > STATIC_SHARED:  # (and an int index an entry)
        raise NotSupported(f"{what} of rows of {n}: {pad} {kt} keys and indices past a block's shared memory")
    outs = _out_params(values, indices)
    lg = "true" if largest else "false"
    source = cuda_text.load("topk.cuh") + cuda_text.load("row_sort.cuh") + f"""
// {name}: {what}, {k} of {n} along dim {dim} of {list(x.shape)}, a block a row
SC_INLINE long long {name}_row(long long r) {{
  {body}
  return off;
}}
SC_INLINE long long {name}_out(long long r, long long t) {{
  return (r / {inner}LL) * ({k}LL * {inner}LL) + t * {inner}LL + r % {inner}LL;
}}
#ifdef __CUDACC__
__global__ void __launch_bounds__({SORT_THREADS}) {name}_kernel(const {t}* __restrict__ x, {t}* vals, long long* idx) {{
  __shared__ {kt} key[{pad}];
  __shared__ int ix[{pad}];
  for (long long r = blockIdx.x; r < {rows}LL; r += gridDim.x) {{
    const long long base = {name}_row(r);
    for (int j = threadIdx.x; j < {pad}; j += blockDim.x) {{
      const bool in = j < {n};
      key[j] = in ? sc_sort_key(x[base + j * {x.strides[dim]}LL]) : ({kt})0;
      ix[j] = in ? j : -1;
    }}
    __syncthreads();
    sc_row_sort_block<{lg}>(key, ix, {pad});
    for (int j = threadIdx.x; j < {k}; j += blockDim.x) {{
      const int s = sc_row_pick(key, {n}, {at}, {rule}) + j;
      if (vals) vals[{name}_out(r, j)] = sc_from_key<{t}>(key[s]);
      if (idx) idx[{name}_out(r, j)] = ix[s];
    }}
    __syncthreads();  // (the next row overwrites the shared entries)
  }}
}}
#endif
"""
    threads = min(SORT_THREADS, max(32, pad // 2))
    device = f"  if ({rows}LL > 0) {name}_kernel<<<{max(1, min(rows, 65535 * 8))}, {threads}, 0, stream>>>(x, vals, idx);"
    host_row = f"sc_row_sort_host<{lg}>(x, {name}_row(r), {x.strides[dim]}LL, {n}LL, {k}, {at}, {rule},"
    return _kernel(name, x, outs, rows, source, device, host_row,
                   f"{what}: {k} of {n} along dim {dim}, {rows} rows, a block a row (sorted whole in shared memory)")


def emit_pick(ctx: EmitContext) -> Kernel:
    """torch.median and torch.nanmedian (the lower median: the entry (n - 1) // 2 of the sorted row;
    a row holding NaN has NaN as its median, nanmedian's the median of the rest) and torch.kthvalue
    (the k-th smallest), along a dim or, for median() and nanmedian() without one, of every element:
    the sorted row's one entry, and its index."""
    op = ctx.node["op"]
    x = ctx.args.get("self")
    if not isinstance(x, Operand) or x.dtype not in SORT_KEYS or x.numel == 0:
        raise NotSupported(f"{op} of a {getattr(x, 'dtype', 'non-tensor')} or empty tensor")
    dim = ctx.args.get("dim")
    if dim is None:  # every element: a contiguous tensor as one row
        if op == "kthvalue" or not x.contiguous:
            raise NotSupported(f"{op} of every element of a non-contiguous tensor")
        x = Operand(x.name, (x.numel,), (1,), x.offset, x.dtype)
        dim = 0
    if type(dim) is not int or not x.shape:
        raise NotSupported(f"{op}'s dim")
    dim %= len(x.shape)
    n = x.shape[dim]
    if n > MAX_ROW:
        raise NotSupported(f"{op} of rows of {n} (at most {MAX_ROW})")
    if op == "kthvalue":
        k = ctx.args.get("k")
        if type(k) is not int or not 1 <= k <= n:
            raise NotSupported(f"kthvalue's k={k!r} of {n}")
        pick, what = ("at", k - 1), f"kthvalue {k}"
    else:
        pick, what = (op, (n - 1) // 2), op
    return _row_sort(ctx, x, dim, 1, False, what, pick)


EMITTERS = {"topk": emit_topk, "sort": emit_sort, "median": emit_pick, "nanmedian": emit_pick, "kthvalue": emit_pick}
