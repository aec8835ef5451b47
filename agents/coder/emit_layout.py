"""Data-movement kernels: cat, stack, flip, triu/tril, constant, reflection and replication padding, im2col
(F.unfold), F.affine_grid and F.grid_sample (bilinear, nearest), embedding bags, roll, fills, reads
through an index tensor (index_select, gather, embedding, x[:, idx]), and resampling (nearest,
linear and bicubic upsampling as F.interpolate traces them).

Each output element is read from one place of one source (or is a constant), so every op here is a
row of one table: a function from the output coordinates `c0..c{n-1}` to C statements that assign
`y[o]`. One walker turns a row into a grid-stride kernel over the contiguous output, plus a
`NAME_host` entry running the same per-element function on the CPU for tests.

Sources are read through their Operand strides and offset, so views (transposes, slices) cost no copy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from stitchcuda.agents.coder.codegen import C_TYPES, ITEM_SIZE, THREADS, KernelArg, Prologue, c_float
from stitchcuda.agents.coder.kernels import (
    EmitContext,
    Gather,
    Kernel,
    NotSupported,
    Operand,
    OutSpec,
    grid_stride_kernel,
    launchers,
    per_element,
)

DTYPES = ("float32", "float16", "bfloat16", "int64", "bool")
# Index tensors may also be int32 (token ids from numpy or a tokenizer's int32 arrays): read as
# indices only, never computed with, so the kernels' index arithmetic (int64) takes them as they are.
INDEX_DTYPES = ("int64", "int32")
_SOURCE_CTYPES = {**C_TYPES, "int32": "int32_t"}
_FLOATS = ("float32", "float16", "bfloat16")


WRAP_INDEX = """#ifndef SC_WRAP_INDEX
#define SC_WRAP_INDEX
SC_INLINE int64_t sc_wrap_index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return (i >= 0 && i < n) ? i : 0;
}
#endif
"""


# Below this many elements the coordinates are split in 32-bit arithmetic: a division by a constant
# is a multiply-high and a shift there, against a dozen instructions in 64 bits, and at 4-5 bytes of
# memory traffic an element the 64-bit split of a 5-D index is more instructions than the bandwidth
# leaves time for. (Offsets stay 64-bit: offset_of multiplies by 64-bit strides.)
NARROW_INDEX = 1 << 31


def coords_of(shape: Sequence[int], var: str) -> list[str]:
    """C statements defining c0..c{n-1}, the row-major coordinates of element `var` of `shape`
    (int32_t where the tensor has fewer than NARROW_INDEX elements, else int64_t)."""
    numel = 1
    for n in shape:
        numel *= n
    t = "int32_t" if numel < NARROW_INDEX else "int64_t"
    lines = [f"{t} r = ({t}){var};"]
    for d in reversed(range(len(shape))):
        lines.append(f"const {t} c0 = r;" if d == 0 else f"const {t} c{d} = r % {shape[d]}; r /= {shape[d]};")
    # (a size-1 dim's coordinate has no term in an offset, and a fill reads none: each marked used,
    # the build stays warning-free)
    return [*lines, "(void)r;", *(f"(void)c{d};" for d in range(len(shape)))]


def offset_of(src: Operand, coords: Sequence[str]) -> str:
    terms = [f"({c}) * {s}LL" for c, s, n in zip(coords, src.strides, src.shape, strict=True) if n != 1 and s != 0]
    return " + ".join([str(src.offset), *terms]) if terms else str(src.offset)


def _read(src: Operand, k: int, coords: Sequence[str], out_dtype: str) -> str:
    value = f"x{k}[{offset_of(src, coords)}]"
    if src.dtype == out_dtype:
        return value
    if src.dtype in ("int64",) or out_dtype in ("int64",):
        raise NotSupported(f"cat of {src.dtype} into {out_dtype}")
    return f"sc_from_f<{C_TYPES[out_dtype]}>(sc_to_f({value}))"


def _zero(dtype: str, value: float = 0.0) -> str:
    if dtype == "int64":
        if value != int(value):
            raise NotSupported(f"fill value {value} for an int64 tensor")
        return f"(int64_t){int(value)}"
    if dtype == "bool":
        return "true" if value else "false"
    return f"sc_from_f<{C_TYPES[dtype]}>({c_float(value)})"


# Each body function returns (statements assigning y[o], sources read, description).
Body = tuple[list[str], list[Operand], str]


def _tensors_and_dim(ctx: EmitContext, rank: int) -> tuple[list[Operand], int]:
    """cat's and stack's list of sources and their dim (made non-negative for a result of `rank`)."""
    given = ctx.args.get("tensors", [])
    sources = [s for s in given if isinstance(s, Operand)]
    if len(sources) != len(given) or not sources:
        raise NotSupported(f"{ctx.node['op']} of non-tensor arguments")
    dim = ctx.args.get("dim", 0)
    return sources, dim + rank if dim < 0 else dim


def _loader_of(ctx: EmitContext, src: Operand, out_dtype: str) -> Prologue | None:
    """The chain a cat's or stack's source is computed from as it is read (ctx.sources), where it
    can be: a contiguous source (its offset is the loader's row-major index) into a float result."""
    pro = ctx.sources.get(src.name)
    return pro if pro is not None and src.contiguous and pro.shape == src.shape and out_dtype in _FLOATS else None


def _gather_of(ctx: EmitContext, src: Operand, out_dtype: str) -> Gather | None:
    """The rows a cat's or stack's source picks from a table (ctx.gathers: x[idx] or index_select,
    which nothing else reads), read through the index as the source is copied, where it can be: the
    gather's own result, unviewed (its coordinates are the gather's), into a result of the table's
    dtype or from one float to another."""
    g = ctx.gathers.get(src.name)
    if g is None or not src.contiguous or g.index.dtype != "int64" or len(g.index.shape) != 1:
        return None
    picked = tuple(g.index.shape[0] if d == g.dim else n for d, n in enumerate(g.table.shape))
    if picked != tuple(src.shape) or src.dtype != g.table.dtype:
        return None
    if src.dtype != out_dtype and not (src.dtype in _FLOATS and out_dtype in _FLOATS):
        return None
    return g


def _source_read(ctx: EmitContext, src: Operand, k: int, coords: Sequence[str], out_dtype: str) -> str:
    """Source k of a cat or stack at `coords`: read from memory, from its loader (_loader_of), or
    from the table its rows are picked from, through the index in `g{k}` (_gather_of)."""
    g = _gather_of(ctx, src, out_dtype)
    if g is not None:
        at = list(coords)
        at[g.dim] = f"sc_wrap_index(g{k}[{offset_of(g.index, [coords[g.dim]])}], {g.table.shape[g.dim]}LL)"
        return _read(g.table, k, at, out_dtype)
    if _loader_of(ctx, src, out_dtype) is None:
        return _read(src, k, coords, out_dtype)
    got = f"ld{k}({offset_of(src, coords)})"
    return got if out_dtype == "float32" else f"sc_from_f<{C_TYPES[out_dtype]}>({got})"


def _cat(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    sources, dim = _tensors_and_dim(ctx, len(out.shape))
    # torch skips 1-D empty tensors in cat; they contribute nothing.
    sources = [s for s in sources if not (len(s.shape) == 1 and s.shape[0] == 0)]
    lines: list[str] = []
    start = 0
    for k, src in enumerate(sources):
        if len(src.shape) != len(out.shape):
            raise NotSupported("cat of tensors of different ranks")
        here = list(coords)
        here[dim] = f"({coords[dim]} - {start})"
        end = start + src.shape[dim]
        keyword = "if" if k == 0 else "else if"
        cond = f"({coords[dim]} < {end})" if k < len(sources) - 1 else ""
        read = _source_read(ctx, src, k, here, out.dtype)
        if cond:
            lines.append(f"{keyword} {cond} y[o] = {read};")
        else:
            lines.append(f"{'else ' if k else ''}y[o] = {read};")
        start = end
    if start != out.shape[dim]:
        raise NotSupported(f"cat sizes add to {start}, the traced result has {out.shape[dim]}")
    return lines, sources, f"cat of {len(sources)} along dim {dim}"


def _stack(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    sources, dim = _tensors_and_dim(ctx, len(out.shape))
    if out.shape[dim] != len(sources):
        raise NotSupported(f"stack of {len(sources)} tensors into a dim of {out.shape[dim]}")
    here = coords[:dim] + coords[dim + 1 :]
    lines = []
    for k, src in enumerate(sources):
        if len(src.shape) != len(out.shape) - 1:
            raise NotSupported("stack of tensors of different ranks")
        keyword = "if" if k == 0 else "else if"
        read = _source_read(ctx, src, k, here, out.dtype)
        lines.append(f"{keyword} ({coords[dim]} == {k}) y[o] = {read};" if k < len(sources) - 1 else f"{'else ' if k else ''}y[o] = {read};")
    return lines, sources, f"stack of {len(sources)} along dim {dim}"


def _slice_scatter(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """slice_scatter (a slice assigned into a tensor, as functionalisation traces `buf[:, a:b] = v`:
    TSM's temporal shift into zeros, a KV cache's write): `src` inside the slice, `self` elsewhere."""
    base, src = ctx.args["self"], ctx.args["src"]
    rank = len(out.shape)
    if not isinstance(src, Operand) or len(src.shape) != rank or tuple(base.shape) != tuple(out.shape):
        raise NotSupported("slice_scatter of a source of another rank")
    dim = int(ctx.args.get("dim", 0)) % rank
    size = out.shape[dim]
    start, end, step = ctx.args.get("start"), ctx.args.get("end"), int(ctx.args.get("step") or 1)
    start = 0 if start is None else int(start) + (size if int(start) < 0 else 0)
    end = size if end is None else int(end) + (size if int(end) < 0 else 0)
    start, end = min(max(start, 0), size), min(max(end, 0), size)
    if step < 1 or len(range(start, end, step)) != src.shape[dim] \
            or any(src.shape[d] != out.shape[d] for d in range(rank) if d != dim):
        raise NotSupported(f"slice_scatter of {list(src.shape)} into {list(out.shape)} at {start}:{end}:{step}")
    c = coords[dim]
    inside = f"{c} >= {start} && {c} < {end}" + (f" && ({c} - {start}) % {step} == 0" if step > 1 else "")
    here = list(coords)
    here[dim] = f"(({c} - {start}) / {step})" if step > 1 else f"({c} - {start})"
    read = f"({inside}) ? {_read(src, 1, here, out.dtype)} : {_read(base, 0, coords, out.dtype)}"
    return [f"y[o] = {read};"], [base, src], f"slice_scatter along dim {dim} at {start}:{end}:{step}"


def _select_scatter(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """select_scatter (one index assigned into a tensor, as functionalisation traces `x[:, 0] = v`):
    `src`, which lacks `dim`, at that index; `self` elsewhere."""
    base, src = ctx.args["self"], ctx.args["src"]
    rank = len(out.shape)
    if not isinstance(src, Operand) or not rank or len(src.shape) != rank - 1 or tuple(base.shape) != tuple(out.shape):
        raise NotSupported("select_scatter of a source of another rank")
    dim = int(ctx.args.get("dim", 0)) % rank
    index = int(ctx.args.get("index", 0))
    index += out.shape[dim] if index < 0 else 0
    if not 0 <= index < out.shape[dim] or list(src.shape) != [n for d, n in enumerate(out.shape) if d != dim]:
        raise NotSupported(f"select_scatter of {list(src.shape)} into {list(out.shape)} at {index}")
    here = [c for d, c in enumerate(coords) if d != dim]
    read = f"({coords[dim]} == {index}) ? {_read(src, 1, here, out.dtype)} : {_read(base, 0, coords, out.dtype)}"
    return [f"y[o] = {read};"], [base, src], f"select_scatter along dim {dim} at {index}"


def _flip(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    src = ctx.args["self"]
    dims = {d + len(out.shape) if d < 0 else d for d in ctx.args.get("dims", [])}
    here = [f"({n - 1} - {c})" if d in dims else c for d, (c, n) in enumerate(zip(coords, out.shape, strict=True))]
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src], f"flip dims {sorted(dims)}"


def _channel_shuffle(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """nn.ChannelShuffle: the channels seen as (groups, C / groups), transposed; output channel c
    reads input channel (c % groups) * (C / groups) + c / groups."""
    src, groups = ctx.args["self"], int(ctx.args.get("groups", 1))
    if len(out.shape) < 2 or groups < 1 or out.shape[1] % groups:
        raise NotSupported(f"channel shuffle of {list(out.shape)} in {groups} groups")
    c = coords[1]
    here = [coords[0], f"(({c} % {groups}) * {out.shape[1] // groups} + {c} / {groups})", *coords[2:]]
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src], f"channel shuffle in {groups} groups"


def _triangle(upper: bool) -> Callable[[EmitContext, OutSpec, list[str]], Body]:
    def body(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
        src = ctx.args["self"]
        if len(out.shape) < 2:
            raise NotSupported("triu/tril of a tensor with fewer than 2 dims")
        diag = int(ctx.args.get("diagonal", 0))
        cmp = ">=" if upper else "<="
        keep = f"({coords[-1]} - {coords[-2]} {cmp} {diag})"
        line = f"y[o] = {keep} ? {_read(src, 0, coords, out.dtype)} : {_zero(out.dtype)};"
        return [line], [src], f"{'triu' if upper else 'tril'} diagonal {diag}"

    return body


def _pad(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    src = ctx.args["self"]
    pad = list(ctx.args.get("pad", []))
    value = ctx.args.get("value", 0.0) or 0.0
    if len(pad) % 2 or len(pad) // 2 > len(out.shape):
        raise NotSupported(f"pad {pad}")
    lo = [0] * len(out.shape)
    for k in range(len(pad) // 2):
        lo[len(out.shape) - 1 - k] = pad[2 * k]
    here = [f"({c} - {p})" if p else c for c, p in zip(coords, lo, strict=True)]
    inside = [f"({h} >= 0 && {h} < {n})" for h, n, p, q in zip(here, src.shape, lo, out.shape, strict=True) if p or n != q]
    read = _read(src, 0, here, out.dtype)
    if not inside:
        return [f"y[o] = {read};"], [src], "pad"
    return [f"y[o] = ({' && '.join(inside)}) ? {read} : {_zero(out.dtype, value)};"], [src], f"pad {pad}"


REFLECT_INDEX = """#ifndef SC_REFLECT_INDEX
#define SC_REFLECT_INDEX
SC_INLINE int64_t sc_reflect_index(int64_t i, int64_t n) {
  if (i < 0) i = -i;
  return i < n ? i : 2 * (n - 1) - i;
}
#endif
"""


def _edge_pad(reflect: bool) -> Callable[[EmitContext, OutSpec, list[str]], Body]:
    """reflection_padNd / replication_padNd: a padded position reads the source mirrored about its
    edge element (PyTorch allows a pad shorter than the dim, so one reflection reaches inside) or the
    edge element itself."""

    def body(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
        src = ctx.args["self"]
        pad = [int(v) for v in _listed(ctx.args.get("padding"))]
        if not pad or len(pad) % 2 or len(pad) // 2 > len(out.shape) or any(p < 0 for p in pad):
            raise NotSupported(f"padding {pad}")
        lo = [0] * len(out.shape)
        for k in range(len(pad) // 2):
            lo[len(out.shape) - 1 - k] = pad[2 * k]
        here = []
        for c, p, n, q in zip(coords, lo, src.shape, out.shape, strict=True):
            if not p and n == q:
                here.append(c)
                continue
            i = f"({c} - {p})" if p else c
            if reflect:
                if max(p, q - n - p) >= n:
                    raise NotSupported(f"reflection pad {pad} reaches past the opposite edge of {n}")
                here.append(f"sc_reflect_index({i}, {n})")
            else:
                here.append(f"({i} < 0 ? 0 : ({i} > {n - 1} ? {n - 1} : {i}))")
        kind = "reflection" if reflect else "replication"
        return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src], f"{kind} pad {pad}"

    return body


def _im2col(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """F.unfold: output (n, c*KH*KW + i*KW + j, oy*OW + ox) is input (n, c, oy*SH - PH + i*DH,
    ox*SW - PW + j*DW), zero outside it."""
    src = ctx.args["self"]
    try:
        (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (
            [int(v) for v in _listed(ctx.args.get(k))] for k in ("kernel_size", "dilation", "padding", "stride"))
    except ValueError:
        raise NotSupported("im2col arguments") from None
    if len(src.shape) not in (3, 4) or len(out.shape) != len(src.shape) - 1:
        raise NotSupported(f"im2col of shape {list(src.shape)}")
    h, w = src.shape[-2:]
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    if tuple(out.shape[-2:]) != (src.shape[-3] * kh * kw, oh * ow):
        raise NotSupported(f"im2col result {list(out.shape)}")
    cc, ll = coords[-2], coords[-1]
    iy = f"(({ll} / {ow}) * {sh} - {ph} + (({cc} / {kw}) % {kh}) * {dh})"
    ix = f"(({ll} % {ow}) * {sw} - {pw} + ({cc} % {kw}) * {dw})"
    here = [*coords[:-2], f"({cc} / {kh * kw})", iy, ix]
    read = _read(src, 0, here, out.dtype)
    inside = f"{iy} >= 0 && {iy} < {h} && {ix} >= 0 && {ix} < {w}"
    return [f"y[o] = ({inside}) ? {read} : {_zero(out.dtype, 0.0)};"], [src], f"im2col {kh}x{kw}"


def _col2im(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """F.fold, im2col's adjoint: output (n, c, y, x) sums input (n, c*KH*KW + i*KW + j, by*BW + bx)
    over the taps (i, j) whose block (by, bx) = ((y + PH - i*DH) / SH, (x + PW - j*DW) / SW) lands
    on the stride's grid inside the blocks, in i-then-j order as PyTorch's col2im adds them; fp32
    sums."""
    src = ctx.args["self"]
    try:
        (oh_, ow_), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (
            [int(v) for v in _listed(ctx.args.get(k))]
            for k in ("output_size", "kernel_size", "dilation", "padding", "stride"))
    except ValueError:
        raise NotSupported("col2im arguments") from None
    if len(src.shape) not in (2, 3) or len(out.shape) != len(src.shape) + 1 or tuple(out.shape[-2:]) != (oh_, ow_):
        raise NotSupported(f"col2im of shape {list(src.shape)}")
    bh = (oh_ + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (ow_ + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    c = out.shape[-3]
    if tuple(src.shape[-2:]) != (c * kh * kw, bh * bw) or out.dtype not in ("float32", "float16", "bfloat16"):
        raise NotSupported(f"col2im of {list(src.shape)} into {list(out.shape)}")
    cy, cx, cc = coords[-2], coords[-1], coords[-3]
    lines = ["float acc = 0.f;",
             f"for (int64_t i = 0; i < {kh}; ++i) {{",
             f"  const int64_t ty = {cy} + {ph} - i * {dh};",
             f"  if (ty < 0 || ty % {sh} != 0 || ty / {sh} >= {bh}) continue;",
             f"  for (int64_t j = 0; j < {kw}; ++j) {{",
             f"    const int64_t tx = {cx} + {pw} - j * {dw};",
             f"    if (tx < 0 || tx % {sw} != 0 || tx / {sw} >= {bw}) continue;",
             f"    acc += sc_to_f(x0[{offset_of(src, [*coords[:-3], f'({cc} * {kh * kw} + i * {kw} + j)', f'((ty / {sh}) * {bw} + tx / {sw})'])}]);",
             "  }",
             "}",
             f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>(acc);"]
    return lines, [src], f"col2im {kh}x{kw}"


def _roll(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    src = ctx.args["self"]
    shifts = [int(v) for v in _listed(ctx.args.get("shifts"))]
    dims = [int(v) % len(out.shape) for v in _listed(ctx.args.get("dims"))]
    if not dims or len(dims) != len(shifts):
        raise NotSupported("roll of the flattened tensor")
    here = list(coords)
    for d, k in zip(dims, shifts, strict=True):
        n = out.shape[d]
        here[d] = f"((({here[d]} - {k % n}) % {n} + {n}) % {n})"
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src], f"roll {shifts} along {dims}"


def _repeat(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """Tensor.repeat: the source (its shape padded with leading ones to the repeats' length) tiled;
    output element c reads the source at c % its size along each dim (InstanceNorm2d(affine=True)
    repeats its weight and bias once a sample; class tokens and position tables are tiled so)."""
    src = ctx.args["self"]
    repeats = [int(v) for v in _listed(ctx.args.get("repeats"))]
    extra = len(repeats) - len(src.shape)
    if extra < 0 or len(out.shape) != len(repeats):
        raise NotSupported(f"repeat {repeats} of {list(src.shape)}")
    here = [c if n == 1 or r == 1 else f"({c} % {n})"
            for c, n, r in zip(coords[extra:], src.shape, repeats[extra:], strict=True)]
    here = ["0" if n == 1 else h for h, n in zip(here, src.shape, strict=True)]
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src], f"repeat {repeats}"


def _index_at(index: Operand, k: int, coords: Sequence[str], size: int) -> str:
    """An index read from tensor x{k}, negative ones counted from the end (as torch does); one out of
    range reads element 0 (torch raises, a kernel cannot: the reference's own inputs never do)."""
    raw = f"x{k}[{offset_of(index, coords)}]"
    return f"sc_wrap_index({raw}, {size}LL)"


def _sources_with_index(ctx: EmitContext, key: str) -> tuple[Operand, Operand]:
    src, index = ctx.args["self" if "self" in ctx.args else "weight"], ctx.args[key]
    if not isinstance(src, Operand) or not isinstance(index, Operand) or index.dtype not in INDEX_DTYPES:
        raise NotSupported(f"{ctx.node['op']}: needs a tensor and an int64 or int32 index tensor")
    return src, index


def _index_select(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    src, index = _sources_with_index(ctx, "index")
    dim = int(ctx.args.get("dim", 0)) % len(out.shape)
    here = list(coords)
    here[dim] = _index_at(index, 1, [coords[dim]], src.shape[dim])
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src, index], f"index_select along dim {dim}"


def _gather(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    src, index = _sources_with_index(ctx, "index")
    dim = int(ctx.args.get("dim", 0)) % len(out.shape)
    if tuple(index.shape) != tuple(out.shape):
        raise NotSupported("gather: index and result shapes differ")
    here = list(coords)
    here[dim] = _index_at(index, 1, coords, src.shape[dim])
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], [src, index], f"gather along dim {dim}"


def _embedding(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    weight, index = _sources_with_index(ctx, "indices")
    if len(weight.shape) != 2:
        raise NotSupported("embedding of a weight that is not 2-D")
    row = _index_at(index, 1, coords[:-1], weight.shape[0])
    return [f"y[o] = {_read(weight, 0, [row, coords[-1]], out.dtype)};"], [weight, index], "embedding rows"


def _index(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """x[..., idx, ...] with int64 index tensors at some dims and full slices elsewhere (Swin's
    relative position bias, a column pick, DLRM's x[:, li, lj] pairwise pick): the index tensors
    broadcast to one shape B, which takes the place of the indexed dims where they are adjacent and
    comes first where they are not, as PyTorch's advanced indexing places it."""
    src = ctx.args["self"]
    picks = list(ctx.args.get("indices") or [])
    given = [(p, i) for p, i in enumerate(picks) if i is not None]
    if not given or not all(isinstance(i, Operand) and i.dtype in INDEX_DTYPES for _, i in given):
        raise NotSupported("index with other than int64 or int32 index tensors")
    rank = len(src.shape)
    shapes = [tuple(i.shape) for _, i in given]
    nb = max(len(sh) for sh in shapes)
    b = [1] * nb
    for sh in shapes:  # broadcast, trailing dims aligned
        for k, n in enumerate(sh):
            d = nb - len(sh) + k
            if n != 1 and b[d] not in (1, n):
                raise NotSupported(f"index tensors of shapes {shapes} do not broadcast")
            b[d] = max(b[d], n)
    positions = [p for p, _ in given]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    rest = [d for d in range(rank) if d not in positions]
    first = positions[0] if adjacent else 0
    if len(out.shape) != len(rest) + nb or any(out.shape[first + k] != n for k, n in enumerate(b)):
        raise NotSupported(f"index: result {list(out.shape)} is not the indexed shape")
    bcoords = coords[first:first + nb]
    outer = coords[:first] + coords[first + nb:]  # the result's coordinates of the dims not indexed
    here: list[str] = [""] * rank
    for d, c in zip(rest, outer, strict=True):
        here[d] = c
    sources: list[Operand] = [src]
    for k, (p, index) in enumerate(given, start=1):
        at = [("0" if n == 1 else bc) for n, bc in zip(index.shape, bcoords[nb - len(index.shape):], strict=True)]
        here[p] = _index_at(index, k, at, src.shape[p])
        sources.append(index)
    return [f"y[o] = {_read(src, 0, here, out.dtype)};"], sources, f"index along dims {positions}"


def _arange(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """torch.arange made in forward: start + step * i, in int64 for integer results and in double
    otherwise (as PyTorch's CPU kernel accumulates; its CUDA kernel's float differs only where the
    values pass 2^24), rounded once to the result's dtype."""
    a = ctx.args
    start, end, step = a.get("start", 0), a.get("end"), a.get("step", 1)
    if any(not isinstance(v, int | float) or isinstance(v, bool) for v in (start, end, step)) or len(out.shape) != 1:
        raise NotSupported("arange: numeric start, end and step and a 1-D result only")
    if out.dtype in ("int64", "int32") and all(isinstance(v, int) for v in (start, step)):
        value = f"({C_TYPES[out.dtype]})({start}LL + {step}LL * {coords[0]})"
    elif out.dtype in ("float32", "float16", "bfloat16"):
        value = f"sc_from_f<{C_TYPES[out.dtype]}>((float)({float(start)!r} + {float(step)!r} * (double){coords[0]}))"
    else:
        raise NotSupported(f"arange of {out.dtype}")
    return [f"y[o] = {value};"], [], f"arange {start}, {end}, {step}"


def _eye(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """torch.eye made in forward (A + I, an off-diagonal mask 1 - I): 1 where the coordinates agree."""
    if len(out.shape) != 2:
        raise NotSupported("eye of a result that is not 2-D")
    return [f"y[o] = {coords[0]} == {coords[1]} ? {_zero(out.dtype, 1.0)} : {_zero(out.dtype)};"], [], "eye"


def _triangle_indices(upper: bool) -> Callable[[EmitContext, OutSpec, list[str]], Body]:
    """torch.tril_indices / triu_indices made in forward (a PNN's or FM's pair indices): [2, count],
    row-major over the triangle as ATen lists it. Element k's row is found by a binary search over
    the rows' running counts, each in closed form: a row of tril takes clamp(r + offset + 1, 0, col)
    columns from 0, one of triu col - clamp(r + offset, 0, col) from max(r + offset, 0)."""

    def emit(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
        a = ctx.args
        row, col, offset = a.get("row"), a.get("col"), a.get("offset", 0)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (row, col, offset)) \
                or len(out.shape) != 2 or out.shape[0] != 2 or out.dtype not in ("int64", "int32"):
            raise NotSupported("tril/triu_indices: integer row, col and offset, a [2, count] integer result")
        d = offset if upper else offset + 1
        # S(r) = sum over i < r of clamp(i + d, 0, col): the v = i + d in (0, col) from a, col from b on.
        s = (f"[](long long tri_r) {{ const long long tri_a = tri_r < 1 - ({d}LL) ? tri_r : (1 - ({d}LL) < 0 ? 0 : 1 - ({d}LL)); "
             f"long long tri_b = {col}LL - ({d}LL); tri_b = tri_b < tri_a ? tri_a : (tri_b > tri_r ? tri_r : tri_b); "
             f"return (tri_b - tri_a) * ({d}LL) + (tri_a + tri_b - 1) * (tri_b - tri_a) / 2 + (tri_r - tri_b) * {col}LL; }}")

        # (names of their own: the kernel's body has an `r` and a `k` of its own around these lines)
        def before(r: str) -> str:
            return f"({r} * {col}LL - tri_sum({r}))" if upper else f"tri_sum({r})"

        first = f"(tri_row + ({offset}LL) > 0 ? tri_row + ({offset}LL) : 0LL)" if upper else "0LL"
        lines = [
            f"const auto tri_sum = {s};",
            f"const long long tri_k = {coords[1]};",
            f"long long tri_lo = 0, tri_hi = {row}LL;",  # the last row whose running count is at most k
            "while (tri_lo < tri_hi) {",
            "  const long long tri_mid = (tri_lo + tri_hi + 1) / 2;",
            f"  if ({before('tri_mid')} <= tri_k) tri_lo = tri_mid; else tri_hi = tri_mid - 1;",
            "}",
            "const long long tri_row = tri_lo;",
            f"y[o] = ({C_TYPES[out.dtype]})({coords[0]} == 0 ? tri_row : {first} + (tri_k - {before('tri_row')}));",
        ]
        return lines, [], f"{'triu' if upper else 'tril'}_indices {row}, {col}, {offset}"

    return emit


def _linspace(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """torch.linspace made in forward, by PyTorch's formula: start + step * i in the first half and
    end - step * (steps - 1 - i) in the second (so both ends are exact), step in the result's float."""
    a = ctx.args
    start, end, steps = a.get("start"), a.get("end"), a.get("steps")
    if any(not isinstance(v, int | float) or isinstance(v, bool) for v in (start, end)) \
            or not isinstance(steps, int) or len(out.shape) != 1 or out.dtype not in ("float32", "float16", "bfloat16"):
        raise NotSupported("linspace: numeric start and end, a float 1-D result only")
    if steps == 1:
        return [f"y[o] = {_zero(out.dtype, float(start))};"], [], f"linspace {start}, {end}, 1"
    i = coords[0]
    step = f"(({c_float(end)} - {c_float(start)}) / {float(steps - 1)!r}f)"
    value = (f"({i} < {steps // 2} ? {c_float(start)} + {step} * (float){i} "
             f": {c_float(end)} - {step} * (float)({steps - 1} - {i}))")
    return [f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>({value});"], [], f"linspace {start}, {end}, {steps}"


def _diagonal_scatter(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """diagonal_scatter (an in-place write through torch.diagonal, as functionalisation traces
    `c.diagonal().add_(-1)`): `src` on the diagonal, `self` elsewhere."""
    base, src = ctx.args["self"], ctx.args["src"]
    rank = len(out.shape)
    offset = int(ctx.args.get("offset", 0))
    d1, d2 = int(ctx.args.get("dim1", 0)) % rank, int(ctx.args.get("dim2", 1)) % rank
    if not isinstance(src, Operand) or d1 == d2 or tuple(base.shape) != tuple(out.shape) or len(src.shape) != rank - 1:
        raise NotSupported("diagonal_scatter of a source of another rank")
    c1, c2 = coords[d1], coords[d2]
    on = f"{c2} - {c1} == {offset}"
    here = [c for d, c in enumerate(coords) if d not in (d1, d2)] + [c1 if offset >= 0 else c2]
    read = f"({on}) ? {_read(src, 1, here, out.dtype)} : {_read(base, 0, coords, out.dtype)}"
    return [f"y[o] = {read};"], [base, src], f"diagonal_scatter dims {d1}, {d2} offset {offset}"


def _diag_embed(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """torch.diag_embed (a covariance from variances: 3D Gaussian splatting's scales, a Gaussian
    policy's diagonal): the input's last dim on the diagonal of dims dim1, dim2, zero elsewhere."""
    src = ctx.args["self"]
    rank = len(out.shape)
    offset = int(ctx.args.get("offset", 0))
    d1, d2 = int(ctx.args.get("dim1", -2)) % rank, int(ctx.args.get("dim2", -1)) % rank
    if not isinstance(src, Operand) or d1 == d2 or len(src.shape) != rank - 1:
        raise NotSupported("diag_embed of a source of another rank")
    c1, c2 = coords[d1], coords[d2]
    here = [c for d, c in enumerate(coords) if d not in (d1, d2)] + [c1 if offset >= 0 else c2]
    read = f"({c2} - {c1} == {offset}) ? {_read(src, 0, here, out.dtype)} : {_zero(out.dtype)}"
    return [f"y[o] = {read};"], [src], f"diag_embed dims {d1}, {d2} offset {offset}"


def _cross(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """torch.linalg.cross of 3-vectors: component c is a[c+1] b[c+2] - a[c+2] b[c+1] (mod 3), in
    fp32 as PyTorch's kernel computes it."""
    a, b = ctx.args["self"], ctx.args["other"]
    dim = int(ctx.args.get("dim", -1)) % len(out.shape)
    if not isinstance(b, Operand) or tuple(a.shape) != tuple(out.shape) or tuple(b.shape) != tuple(out.shape) \
            or out.shape[dim] != 3 or out.dtype not in ("float32", "float16", "bfloat16"):
        raise NotSupported("linalg_cross: same-shape float operands of 3 along dim only")
    c = coords[dim]

    def at(src: Operand, k: int, shift: int) -> str:
        here = list(coords)
        here[dim] = f"(({c} + {shift}) % 3)"
        return f"sc_to_f(x{k}[{offset_of(src, here)}])"

    value = f"{at(a, 0, 1)} * {at(b, 1, 2)} - {at(a, 0, 2)} * {at(b, 1, 1)}"
    return [f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>({value});"], [a, b], f"cross along dim {dim}"


def _search(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """torch.searchsorted and torch.bucketize (NeRF's importance sampling, piecewise-linear
    encodings): each value's insertion index in a sorted last dimension by binary search, with
    PyTorch's own comparisons (`!(b >= v)`, `!(b > v)` with right=True), so a NaN goes past the end
    as it does there."""
    op = ctx.node["op"]
    if op == "bucketize":
        values, seq = ctx.args["self"], ctx.args["boundaries"]
    else:
        values, seq = ctx.args["self"], ctx.args["sorted_sequence"]
    right = bool(ctx.args.get("right")) or ctx.args.get("side") == "right"
    if not isinstance(values, Operand) or not isinstance(seq, Operand) or ctx.args.get("sorter") is not None \
            or ctx.args.get("out_int32") or out.dtype != "int64" \
            or values.dtype not in ("float32", "float16", "bfloat16") or seq.dtype != values.dtype:
        raise NotSupported(f"{op}: float values and sequence of one dtype, int64 results, no sorter")
    if op == "bucketize" and len(seq.shape) != 1:
        raise NotSupported("bucketize: 1-D boundaries")
    rows = list(seq.shape[:-1])
    if rows and rows != list(values.shape[: len(rows)]) or (rows and len(rows) != len(values.shape) - 1):
        raise NotSupported(f"{op}: a sequence whose leading dimensions are not the values'")
    n = seq.shape[-1]
    here = list(coords[: len(rows)])
    keep = "!(sc_to_f(x1[{at}]) > v)" if right else "!(sc_to_f(x1[{at}]) >= v)"
    at = offset_of(seq, [*here, "mid"])
    lines = [f"const float v = sc_to_f(x0[{offset_of(values, coords)}]);",
             "int64_t lo = 0, hi = " + f"{n}LL;",
             "while (lo < hi) {",
             "  const int64_t mid = lo + ((hi - lo) >> 1);",
             f"  if ({keep.format(at=at)}) lo = mid + 1; else hi = mid;",
             "}",
             "y[o] = lo;"]
    return lines, [values, seq], f"{op} in {n} {'(right)' if right else ''}".strip()


def _fill(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    value = {"new_zeros": 0.0, "new_ones": 1.0}.get(ctx.node["op"], ctx.args.get("fill_value", 0.0))
    if not isinstance(value, bool | int | float):
        raise NotSupported(f"{ctx.node['op']} of a tensor value")
    return [f"y[o] = {_zero(out.dtype, float(value))};"], [], f"{ctx.node['op']} {value}"


# Resampling (F.interpolate): per spatial dim of [N, C, *S], the source coordinate PyTorch computes
# (its upsample kernels' formulas, in fp32 with the scale rounded as they round it), then one read
# (nearest) or the 2^d taps of a linear interpolation, summed in fp32 in PyTorch's order. Whole-factor
# nearest upsampling never gets here: the planner rewrites it into a copy (agents/plan/resampling.py).
_RESAMPLE = {  # op -> (spatial dims, scale argument names, kind)
    "upsample_nearest1d": (1, ("scales",), "nearest"),
    "upsample_nearest2d": (2, ("scales_h", "scales_w"), "nearest"),
    "upsample_nearest3d": (3, ("scales_d", "scales_h", "scales_w"), "nearest"),
    "_upsample_nearest_exact1d": (1, ("scales",), "exact"),
    "_upsample_nearest_exact2d": (2, ("scales_h", "scales_w"), "exact"),
    "_upsample_nearest_exact3d": (3, ("scales_d", "scales_h", "scales_w"), "exact"),
    "upsample_linear1d": (1, ("scales",), "linear"),
    "upsample_bilinear2d": (2, ("scales_h", "scales_w"), "linear"),
    "upsample_trilinear3d": (3, ("scales_d", "scales_h", "scales_w"), "linear"),
    "upsample_bicubic2d": (2, ("scales_h", "scales_w"), "cubic"),
}
# Bicubic (PyTorch's get_cubic_upsample_coefficients, A = -0.75): the weights of the four taps at
# distance t + 1, t, 1 - t and 2 - t, each a cubic of its distance; constants folded as PyTorch's
# float arithmetic makes them (A + 2 = 1.25, A + 3 = 2.25, 5A = -3.75, 8A = -6, 4A = -3: all exact).
_CUBIC1 = "((1.25f * ({x}) - 2.25f) * ({x})) * ({x}) + 1.0f"  # cubic_convolution1, |x| <= 1
_CUBIC2 = "((-0.75f * ({x}) - -3.75f) * ({x}) + -6.0f) * ({x}) - -3.0f"  # cubic_convolution2, 1 < |x| < 2


def _f32(value: float) -> float:
    import struct

    return struct.unpack("f", struct.pack("f", value))[0]


GRID_SAMPLE = """#ifndef SC_GRID_SAMPLE
#define SC_GRID_SAMPLE
// ATen's GridSampler.h: a grid coordinate in [-1, 1] to a source position, and the padding modes.
SC_INLINE float sc_gs_unnormalize(float c, int64_t size, bool align) {
  return align ? (c + 1.f) / 2.f * (size - 1) : ((c + 1.f) * size - 1.f) / 2.f;
}
SC_INLINE float sc_gs_clip(float c, int64_t size) { return fminf((float)(size - 1), fmaxf(c, 0.f)); }
SC_INLINE float sc_gs_reflect(float c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0.f;
  const float lo = twice_low / 2.f, span = (twice_high - twice_low) / 2.f;
  c = fabsf(c - lo);
  const float extra = fmodf(c, span);
  const int flips = (int)floorf(c / span);
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}
// padding: 0 zeros, 1 border, 2 reflection.
SC_INLINE float sc_gs_source(float c, int64_t size, int padding, bool align) {
  c = sc_gs_unnormalize(c, size, align);
  if (padding == 1) return sc_gs_clip(c, size);
  if (padding == 2) {
    c = align ? sc_gs_reflect(c, 0, 2 * (size - 1)) : sc_gs_reflect(c, -1, 2 * size - 1);
    return sc_gs_clip(c, size);
  }
  return c;
}
#endif
"""


def _grid_sample(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """F.grid_sample (aten.grid_sampler_2d), bilinear or nearest, any padding mode: output (n, c, h, w)
    reads the grid's (x, y) at (n, h, w) and the input around that position, as ATen's CUDA kernel
    weighs it (corners outside the input count as zeros)."""
    x, grid = ctx.args.get("input"), ctx.args.get("grid")
    mode, padding = ctx.args.get("interpolation_mode", 0), ctx.args.get("padding_mode", 0)
    align = bool(ctx.args.get("align_corners"))
    if not isinstance(x, Operand) or not isinstance(grid, Operand) or mode not in (0, 1) or padding not in (0, 1, 2):
        raise NotSupported(f"grid_sampler_2d (interpolation {mode}, padding {padding})")
    if len(x.shape) != 4 or out.dtype not in _FLOATS or x.dtype != out.dtype or grid.dtype != out.dtype:
        raise NotSupported("grid_sampler_2d: a 4-d float input and grid")
    n, c, h, w = coords
    if tuple(grid.shape) != (out.shape[0], out.shape[2], out.shape[3], 2) or tuple(out.shape[:2]) != tuple(x.shape[:2]):
        raise NotSupported(f"grid_sampler_2d shapes {list(x.shape)}, {list(grid.shape)} -> {list(out.shape)}")
    height, width = x.shape[2], x.shape[3]
    al = "true" if align else "false"

    def src(yy: str, xx: str) -> str:
        return f"sc_to_f(x0[{offset_of(x, [n, c, yy, xx])}])"

    def inside(yy: str, xx: str) -> str:
        return f"({yy} >= 0 && {yy} < {height} && {xx} >= 0 && {xx} < {width})"

    lines = [
        f"const float ix = sc_gs_source(sc_to_f(x1[{offset_of(grid, [n, h, w, '0'])}]), {width}, {padding}, {al});",
        f"const float iy = sc_gs_source(sc_to_f(x1[{offset_of(grid, [n, h, w, '1'])}]), {height}, {padding}, {al});",
    ]
    if mode == 1:  # nearest: round half to even, as nearbyint
        lines += ["const int64_t xn = (int64_t)rintf(ix), yn = (int64_t)rintf(iy);",
                  f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>({inside('yn', 'xn')} ? {src('yn', 'xn')} : 0.f);"]
        return lines, [x, grid], f"grid sample, nearest, padding {padding}"
    lines += [
        "const float fx = floorf(ix), fy = floorf(iy);",
        "const int64_t xw = (int64_t)fx, yn = (int64_t)fy, xe = xw + 1, ys = yn + 1;",
        "const float nw = (xe - ix) * (ys - iy), ne = (ix - xw) * (ys - iy);",
        "const float sw = (xe - ix) * (iy - yn), se = (ix - xw) * (iy - yn);",
        "float acc = 0.f;",
        f"if {inside('yn', 'xw')} acc += {src('yn', 'xw')} * nw;",
        f"if {inside('yn', 'xe')} acc += {src('yn', 'xe')} * ne;",
        f"if {inside('ys', 'xw')} acc += {src('ys', 'xw')} * sw;",
        f"if {inside('ys', 'xe')} acc += {src('ys', 'xe')} * se;",
        f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>(acc);",
    ]
    return lines, [x, grid], f"grid sample, bilinear, padding {padding}"


def _affine_grid(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """F.affine_grid (aten.affine_grid_generator), 2-d: grid (n, h, w, k) = theta[n, k] . (x_w, y_h, 1),
    x and y evenly spaced over [-1, 1] (their pixels' centres without align_corners)."""
    theta = ctx.args.get("theta")
    size = [int(v) for v in _listed(ctx.args.get("size"))]
    align = bool(ctx.args.get("align_corners"))
    if not isinstance(theta, Operand) or len(size) != 4 or tuple(theta.shape) != (size[0], 2, 3) \
            or tuple(out.shape) != (size[0], size[2], size[3], 2) or out.dtype not in _FLOATS:
        raise NotSupported(f"affine_grid_generator of size {size}")
    n, h, w, k = coords

    def spaced(i: str, steps: int) -> str:  # torch.linspace(-1, 1, steps)[i], scaled as ATen's base grid
        if steps <= 1:
            return "0.f"
        value = f"(-1.f + 2.f * (float){i} / {steps - 1}.f)"
        return value if align else f"({value} * {(steps - 1) / steps!r}f)"

    def t(j: int) -> str:
        return f"sc_to_f(x0[{offset_of(theta, [n, k, str(j)])}])"

    lines = [f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>({spaced(w, size[3])} * {t(0)} + {spaced(h, size[2])} * {t(1)} + {t(2)});"]
    return lines, [theta], "affine grid"


def _embedding_bag(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """nn.EmbeddingBag (aten._embedding_bag; sum, mean or max; offsets or 2-d input; per-sample
    weights; padding_idx): output (b, d) sums, averages or takes the largest of the table's rows the
    bag's indices name, skipping padding_idx; an empty bag gives 0, as PyTorch's."""
    table, indices, offsets = (ctx.args.get(k) for k in ("weight", "indices", "offsets"))
    psw = ctx.args.get("per_sample_weights")
    mode, pad, last = ctx.args.get("mode", 0), ctx.args.get("padding_idx", -1), bool(ctx.args.get("include_last_offset"))
    if not all(isinstance(t, Operand) for t in (table, indices, offsets)) or (psw is not None and not isinstance(psw, Operand)):
        raise NotSupported("embedding_bag's operands")
    if any(o is not None for o in ctx.outputs[1:]):
        raise NotSupported("embedding_bag: its bookkeeping results are read")
    if mode not in (0, 1, 2) or len(table.shape) != 2 or len(indices.shape) != 1 or len(offsets.shape) != 1 \
            or indices.dtype != "int64" or offsets.dtype != "int64" or out.dtype not in _FLOATS:
        raise NotSupported(f"embedding_bag (mode {mode})")
    bags = offsets.shape[0] - (1 if last else 0)
    if tuple(out.shape) != (bags, table.shape[1]):
        raise NotSupported(f"embedding_bag result {list(out.shape)}")
    b, d = coords
    count = indices.shape[0]
    hi = f"x2[{offset_of(offsets, [f'({b} + 1)'])}]" if last else \
        f"({b} + 1 < {bags} ? x2[{offset_of(offsets, [f'({b} + 1)'])}] : (int64_t){count})"
    weight = f" * sc_to_f(x3[{offset_of(psw, ['j'])}])" if psw is not None else ""
    lines = [
        f"const int64_t lo = x2[{offset_of(offsets, [b])}], hi = {hi};",
        "float acc = " + ("-INFINITY" if mode == 2 else "0.f") + "; int64_t n = 0;",
        "for (int64_t j = lo; j < hi; ++j) {",
        f"  const int64_t row = x1[{offset_of(indices, ['j'])}];",
        *([f"  if (row == {pad}) continue;"] if pad is not None and pad >= 0 else []),
        f"  const float v = sc_to_f(x0[{offset_of(table, ['row', d])}]){weight};",
        "  acc = " + ("fmaxf(acc, v)" if mode == 2 else "acc + v") + "; ++n;",
        "}",
        "if (n == 0) acc = 0.f;" if mode == 2 else ("acc = n ? acc / (float)n : 0.f;" if mode == 1 else ""),
        f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>(acc);",
    ]
    return [line for line in lines if line], [table, indices, offsets, *([psw] if psw is not None else [])], \
        f"embedding bag, {('sum', 'mean', 'max')[mode]}"


def _resample_scale(size: int, out: int, scale: object, align: bool) -> float:
    """PyTorch's area_pixel_compute_scale in fp32: (in - 1) / (out - 1) with align_corners, else
    1 / scale where a positive scale was given (computed in double, then rounded), else in / out."""
    if align:
        return _f32(_f32(size - 1) / _f32(out - 1)) if out > 1 else 0.0
    if isinstance(scale, int | float) and not isinstance(scale, bool) and scale > 0:
        return _f32(1.0 / scale)
    return _f32(_f32(size) / _f32(out))


def _resample(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    dims, keys, kind = _RESAMPLE[ctx.node["op"]]
    src = ctx.args["self"]
    if not isinstance(src, Operand) or len(src.shape) != dims + 2 or len(out.shape) != dims + 2:
        raise NotSupported(f"{ctx.node['op']} of a rank-{len(getattr(src, 'shape', ()))} tensor")
    if src.dtype not in ("float32", "float16", "bfloat16"):
        raise NotSupported(f"{ctx.node['op']} of {src.dtype}")
    align = bool(ctx.args.get("align_corners")) and kind in ("linear", "cubic")
    lines: list[str] = []
    cubic: list[tuple[list[str], list[str]]] = []  # per spatial dim: (the 4 tap indices, their weights)
    taps: list[tuple[str, str, str]] = []  # per spatial dim: (low index, high index, high weight)
    for d in range(dims):
        size, n, c = src.shape[2 + d], out.shape[2 + d], coords[2 + d]
        scale = _resample_scale(size, n, ctx.args.get(keys[d]), align)
        sc = c_float(scale)
        if kind == "nearest":  # nearest_idx: floor(dst * scale), at most in - 1
            lines.append(f"const int64_t i{d} = min((int64_t)floorf((float){c} * {sc}), (int64_t){size - 1});")
            continue
        if kind == "exact":  # nearest_neighbor_exact_compute_source_index
            lines.append(f"const int64_t i{d} = min((int64_t)floorf(((float){c} + 0.5f) * {sc}), (int64_t){size - 1});")
            continue
        if kind == "cubic":  # area_pixel_compute_source_index with cubic=true: not clamped at 0
            at = f"{sc} * (float){c}" if align else f"{sc} * ((float){c} + 0.5f) - 0.5f"
            lines += [f"const float r{d} = {at};", f"const int64_t f{d} = (int64_t)floorf(r{d});",
                      f"const float t{d} = r{d} - (float)f{d};", f"const float u{d} = 1.0f - t{d};"]
            dists = [f"t{d} + 1.0f", f"t{d}", f"u{d}", f"u{d} + 1.0f"]
            forms = [_CUBIC2, _CUBIC1, _CUBIC1, _CUBIC2]
            lines += [f"const float w{d}_{k} = {forms[k].format(x=dists[k])};" for k in range(4)]
            # upsample_get_value_bounded: each tap's index clamped into the input
            lines += [f"const int64_t k{d}_{k} = min(max(f{d} + (int64_t){k - 1}, (int64_t)0), (int64_t){size - 1});" for k in range(4)]
            cubic.append(([f"k{d}_{k}" for k in range(4)], [f"w{d}_{k}" for k in range(4)]))
            continue
        at = f"{sc} * (float){c}" if align else f"fmaxf({sc} * ((float){c} + 0.5f) - 0.5f, 0.0f)"
        lines += [f"const float r{d} = {at};", f"const int64_t i{d} = (int64_t)r{d};",
                  f"const int64_t j{d} = i{d} + (i{d} < {size - 1}LL ? 1 : 0);",
                  f"const float l{d} = r{d} - (float)i{d};"]
        taps.append((f"i{d}", f"j{d}", f"l{d}"))
    lead = coords[:2]
    if kind == "cubic":
        # cubic_interp1d along the last dim for each of the first dim's four taps, then along the
        # first: x0 * c0 + x1 * c1 + x2 * c2 + x3 * c3, summed left to right as PyTorch sums it.
        (rows, wr), (cols, wc) = cubic
        def interp(values: list[str], weights: list[str]) -> str:
            return " + ".join(f"{v} * {w}" for v, w in zip(values, weights, strict=True))
        row_values = [interp([f"sc_to_f(x0[{offset_of(src, [*lead, r, col])}])" for col in cols], wc) for r in rows]
        lines += [f"const float h{k} = {v};" for k, v in enumerate(row_values)]
        value = interp([f"h{k}" for k in range(4)], wr)
        return ([*lines, f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>({value});"], [src],
                f"{ctx.node['op']} {'align_corners ' if align else ''}-> {list(out.shape[2:])}")
    if kind != "linear":
        read = _read(src, 0, [*lead, *[f"i{d}" for d in range(dims)]], out.dtype)
        return [*lines, f"y[o] = {read};"], [src], f"{ctx.node['op']} -> {list(out.shape[2:])}"

    def blend(d: int, picked: list[str]) -> str:
        """PyTorch's nesting: (1 - l) * (the lower half) + l * (the upper half), the first dim outermost."""
        if d == dims:
            return f"sc_to_f(x0[{offset_of(src, [*lead, *picked])}])"
        lo, hi, w = taps[d]
        return f"((1.0f - {w}) * {blend(d + 1, [*picked, lo])} + {w} * {blend(d + 1, [*picked, hi])})"

    value = blend(0, [])
    return ([*lines, f"y[o] = sc_from_f<{C_TYPES[out.dtype]}>({value});"], [src],
            f"{ctx.node['op']} {'align_corners ' if align else ''}-> {list(out.shape[2:])}")


def _assembled(ctx: EmitContext, out: OutSpec, coords: list[str]) -> Body:
    """A tensor made empty and filled by slice copies (planner's assembled.py; circular padding):
    the copies walked from the last, an element inside a copy from a source read there, inside a
    copy from the tensor itself followed to that copy's source element with the copies before it.
    An element no copy wrote (new_empty's, never read by PyTorch's own uses) is zero."""
    given, copies = ctx.args.get("sources", []), ctx.args.get("copies", [])
    sources = [s for s in given if isinstance(s, Operand)]
    if len(sources) != len(given) or not copies:
        raise NotSupported("assembled tensor's sources")
    nd = len(out.shape)
    at = [f"a{d}" for d in range(nd)]
    lines = [f"int64_t {a} = {c};" for a, c in zip(at, coords, strict=True)]
    lines += [f"{C_TYPES[out.dtype]} v = {_zero(out.dtype)};", "bool got = false;"]
    for copy in reversed(copies):
        box, shift, k = copy["box"], copy["shift"], copy["source"]
        inside = " && ".join(f"{a} >= {lo} && {a} < {hi}" for a, (lo, hi), n in zip(at, box, out.shape, strict=True)
                             if (lo, hi) != (0, n))
        cond = f"!got && {inside}" if inside else "!got"
        moved = [f"({a} + {d})" if d else a for a, d in zip(at, shift, strict=True)]
        if k >= 0:
            lines.append(f"if ({cond}) {{ v = {_read(sources[k], k, moved, out.dtype)}; got = true; }}")
        else:
            steps = " ".join(f"{a} += {d};" for a, d in zip(at, shift, strict=True) if d)
            if steps:
                lines.append(f"if ({cond}) {{ {steps} }}")
    lines += ["(void)got;", "y[o] = v;"]
    return lines, sources, f"assembled from {len(copies)} slice copies"


def _listed(value: object) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


TABLE: dict[str, Callable[[EmitContext, OutSpec, list[str]], Body]] = {
    "roll": _roll,
    "repeat": _repeat,
    "slice_scatter": _slice_scatter,
    "select_scatter": _select_scatter,
    "index_select": _index_select,
    "gather": _gather,
    "embedding": _embedding,
    "index": _index,
    "arange": _arange,
    "eye": _eye,
    "linspace": _linspace,
    "tril_indices": _triangle_indices(False),
    "triu_indices": _triangle_indices(True),
    "diagonal_scatter": _diagonal_scatter,
    "diag_embed": _diag_embed,
    "linalg_cross": _cross,
    "searchsorted": _search,
    "bucketize": _search,
    "new_zeros": _fill,
    "new_ones": _fill,
    "new_full": _fill,
    "cat": _cat,
    "stack": _stack,
    "flip": _flip,
    "channel_shuffle": _channel_shuffle,
    "triu": _triangle(True),
    "tril": _triangle(False),
    "constant_pad_nd": _pad,
    "im2col": _im2col,
    "col2im": _col2im,
    "grid_sampler_2d": _grid_sample,
    "_embedding_bag": _embedding_bag,
    "affine_grid_generator": _affine_grid,
    "assembled": _assembled,
    **{f"reflection_pad{d}d": _edge_pad(True) for d in (1, 2, 3)},
    **{f"replication_pad{d}d": _edge_pad(False) for d in (1, 2, 3)},
    **dict.fromkeys(_RESAMPLE, _resample),
}


# "0": every cat element by element (for same-run comparisons, and a way out).
CAT_CHUNKS_ENV = "STITCHCUDA_CAT_CHUNKS"


def _cat_chunks(ctx: EmitContext, out: OutSpec, name: str, params: str, args: str,
                loaded: Sequence[bool]) -> tuple[str, str] | None:
    """A cat (or stack) read and written 16 bytes a thread: (its chunk kernel, the launcher's test
    that every pointer allows it), or None where it does not apply. Why: SqueezeNet's fire module's cat (two
    ReLU'd convolutions, 4.3 GB of result) took 3.10 ms element by element on the H200 against
    Inductor's 2.76. Applies where each source's elements from the cat's dim on number a multiple of
    VEC (then a chunk of VEC lies in one source, consecutive there: a channels-last cat along C too,
    where each source's channel count is) and every source is the result's dtype,
    contiguous and VEC-aligned in its storage (a source computed as read: a float32 result, through
    its loader's vec). A stack is a cat of slabs one deep along its new dim."""
    stack = ctx.node["op"] == "stack"
    if ctx.node["op"] not in ("cat", "stack") or out.dtype not in ITEM_SIZE or os.environ.get(CAT_CHUNKS_ENV) == "0":
        return None
    sources, dim = _tensors_and_dim(ctx, len(out.shape))
    if not stack:
        sources = [s for s in sources if not (len(s.shape) == 1 and s.shape[0] == 0)]
    vec = 16 // ITEM_SIZE[out.dtype]
    inner = 1
    for n in out.shape[dim + 1:]:
        inner *= n
    numel = inner
    for n in out.shape[: dim + 1]:
        numel *= n
    if vec == 1 or numel == 0 or len(loaded) != len(sources):
        return None
    t = "int32_t" if numel < NARROW_INDEX else "int64_t"
    per_outer = out.shape[dim] * inner
    lines = [f"  const {t} r = ({t})(q * {vec});", f"  const {t} outer = r / {per_outer}, rem = r - outer * {per_outer};",
             f"  const {t} c = rem / {inner}, within = rem - c * {inner};", "  (void)outer;"]
    checks = [f"sc_aligned(y, {vec})"]
    start = 0
    for k, src in enumerate(sources):
        if src.dtype != out.dtype or src.offset % vec or len(src.shape) != len(out.shape) - int(stack):
            return None
        along = 1 if stack else src.shape[dim]
        # (A stack's source is a cat's of one slab along the new dim: checked with that dim in.)
        slab = replace(src, shape=(*src.shape[:dim], 1, *src.shape[dim:]),
                       strides=(*src.strides[:dim], inner, *src.strides[dim:])) if stack else src
        step = along * inner if src.contiguous else _slab_step(slab, dim, inner)
        # Each source's slab a whole number of chunks, so a chunk never spans two sources (nor two
        # slabs of one); the elements after the dim need not be (a channels-last cat has one).
        if step is None or step % vec or (along * inner) % vec or (loaded[k] and not src.contiguous):
            return None
        off = f"{src.offset}LL + (int64_t)outer * {step}LL + (int64_t)(c - {start}) * {inner}LL + within"
        read = f"ld{k}.vec<{vec}>({off})" if loaded[k] else f"sc_load<{vec}>(x{k} + ({off}))"
        checks.append(f"ld{k}.aligned({vec})" if loaded[k] else f"sc_aligned(x{k}, {vec})")
        start += along
        cond = f"if (c < {start}) " if k < len(sources) - 1 else ""
        lines.append(f"  {'else ' if k else ''}{cond}sc_store<{vec}>(y + (int64_t)r, {read});")
    chunk = f"""SC_INLINE void {name}_chunk(int64_t q, {params}) {{
{chr(10).join(lines)}
}}

{grid_stride_kernel(f"{name}_v", f"({name}_n / {vec})", params, args, one=f"{name}_chunk")}"""
    return chunk, " && ".join(checks)


def _slab_step(src: Operand, dim: int, inner: int) -> int | None:
    """Elements between one outer index's slab of a cat's source and the next, where its storage
    holds each slab as a cat's chunks read it (the dims from the cat's on row-major, adjacent) and
    the dims before it step as one: a channel slice of a larger tensor (a chunk or split, as YOLO's
    C2f and CSP blocks cat theirs: a 78 us element-by-element cat of 52 MB on the H200, fc73d70),
    or None. A source with no dims before the cat's has one slab."""
    shape, strides = src.shape, src.strides
    run = 1
    for d in range(len(shape) - 1, dim, -1):
        if shape[d] != 1 and strides[d] != run:
            return None
        run *= shape[d]
    if run != inner or (shape[dim] != 1 and strides[dim] != inner):
        return None
    outer = [d for d in range(dim) if shape[d] != 1]
    if not outer:
        return shape[dim] * inner
    for a, b in zip(outer, outer[1:], strict=False):
        if strides[a] != strides[b] * shape[b]:
            return None
    return strides[outer[-1]]


def _emit(ctx: EmitContext) -> Kernel:
    out = ctx.outputs[0]
    if out is None:
        raise NotSupported(f"{ctx.node['op']}: result unused")
    if out.dtype not in DTYPES:
        raise NotSupported(f"{ctx.node['op']}: dtype {out.dtype}")
    name = ctx.name
    nd = len(out.shape)
    coords = [f"c{d}" for d in range(nd)]
    lines, sources, note = TABLE[ctx.node["op"]](ctx, out, coords)
    picks = [ctx.args.get("index"), ctx.args.get("indices")]
    picks = [p for x in picks for p in (x if isinstance(x, list | tuple) else [x])]
    index_reads = {id(p) for p in picks if isinstance(p, Operand)}  # (index tensors, read as indices only)
    for src in sources:
        if src.dtype not in DTYPES and not (src.dtype in INDEX_DTYPES and id(src) in index_reads):
            raise NotSupported(f"{ctx.node['op']}: source dtype {src.dtype}")
    numel = 1
    for n in out.shape:
        numel *= n
    decomp = coords_of(out.shape, "o")
    octype = C_TYPES[out.dtype]
    body = "\n".join(f"  {line}" for line in decomp + lines)
    # Each source is a pointer, or (read through `ldK(`) a loader of the pointwise chain it stands
    # for, passed by value and made from that chain's own inputs.
    params: list[str] = []
    args: list[str] = []
    raw: list[str] = []
    casts: list[str] = []
    inputs: list[KernelArg] = []
    loaders: list[str] = []
    reads_sources = ctx.node["op"] in ("cat", "stack")  # (the ops whose body reads through _source_read)
    loaded: list[bool] = []
    picked = False  # a source read through a gather's index: no 16-byte chunks
    for k, s in enumerate(sources):
        g = _gather_of(ctx, s, out.dtype) if reads_sources else None
        if g is not None:
            picked = True
            params += [f"const {_SOURCE_CTYPES[g.table.dtype]}* __restrict__ x{k}", f"const int64_t* __restrict__ g{k}"]
            args += [f"x{k}", f"g{k}"]
            casts += [f"  const auto x{k} = static_cast<const {_SOURCE_CTYPES[g.table.dtype]}*>(in{len(raw)}_);",
                      f"  const auto g{k} = static_cast<const int64_t*>(in{len(raw) + 1}_);"]
            raw += [f"const void* in{len(raw)}_", f"const void* in{len(raw) + 1}_"]
            inputs += [KernelArg(g.table.name, g.table.dtype), KernelArg(g.index.name, "int64")]
            loaded.append(False)
            note += f" (source {k}: rows of {g.table.name} picked as read)"
            continue
        pro = _loader_of(ctx, s, out.dtype) if reads_sources else None
        loaded.append(pro is not None)
        if pro is None:
            params.append(f"const {_SOURCE_CTYPES[s.dtype]}* __restrict__ x{k}")
            args.append(f"x{k}")
            casts.append(f"  const auto x{k} = static_cast<const {_SOURCE_CTYPES[s.dtype]}*>(in{len(raw)}_);")
            raw.append(f"const void* in{len(raw)}_")
            inputs.append(KernelArg(s.name, s.dtype))
            continue
        struct = f"{name}_ld{k}"
        loaders.append(pro.loader(struct))
        params.append(f"const {struct} ld{k}")
        args.append(f"ld{k}")
        casts.append(f"  const auto ld{k} = {pro.construct(struct, first=len(raw))};")
        raw += [f"const void* in{len(raw) + j}_" for j in range(len(pro.inputs))]
        inputs += pro.inputs
        note += f" (source {k}: {' -> '.join(pro.ops) or 'copy'}, computed as read)"
    params.append(f"{octype}* __restrict__ y")
    args.append("y")
    raw.append("void* out0_")
    casts.append(f"  const auto y = static_cast<{octype}*>(out0_);")
    n = f"{name}_n"
    chunks = _cat_chunks(ctx, out, name, ", ".join(params), ", ".join(args), loaded) \
        if reads_sources and not picked else None
    if chunks is None:
        launch = per_element(name, n, ", ".join(params), ", ".join(args), raw, casts)
    else:
        # 16 bytes a thread where every pointer allows it; element by element otherwise.
        kernel, aligned = chunks
        vec = 16 // ITEM_SIZE[out.dtype]
        a = ", ".join(args)
        device = (f"  if ({n} == 0) return 0;\n  if ({aligned})\n"
                  f"    {name}_v_kernel<<<sc_grid({n} / {vec}), {THREADS}, 0, stream>>>({a});\n"
                  f"  else\n    {name}_kernel<<<sc_grid({n}), {THREADS}, 0, stream>>>({a});")
        host = (f"  if ({aligned})\n    for (int64_t q = 0; q < {n} / {vec}; ++q) {name}_chunk(q, {a});\n"
                f"  else\n    for (int64_t o = 0; o < {n}; ++o) {name}_one(o, {a});")
        launch = (grid_stride_kernel(name, n, ", ".join(params), a) + kernel
                  + launchers(name, raw, casts, device, host))
        note += f", {16} bytes a thread where aligned"
    source = f"""
// {name}: {note} -> {list(out.shape)}
static constexpr int64_t {n} = {numel}LL;
{WRAP_INDEX if "sc_wrap_index" in body else ""}{REFLECT_INDEX if "sc_reflect_index" in body else ""}{GRID_SAMPLE if "sc_gs_" in body else ""}{"".join(loaders)}
SC_INLINE void {name}_one(int64_t o, {", ".join(params)}) {{
{body}
}}

{launch}"""
    return Kernel(
        name=name,
        inputs=inputs,
        outputs=[KernelArg(out.name, out.dtype)],
        source=source,
        ops=[note],
        host=True,
    )


EMITTERS = {op: _emit for op in TABLE}
