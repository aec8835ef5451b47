"""Pooling kernels: max / average pooling (1-3 spatial dims, padding, dilation, ceil_mode,
count_include_pad, divisor_override) and their adaptive forms, with max-pool indices on request.

One thread computes one output element (grid-stride over the contiguous output). Every window
bound is a compile-time constant or a function of the output coordinate, and the per-output
function `NAME_one` is `__host__ __device__`, so `NAME_host` runs the very same arithmetic on the
CPU. Window walk order, the -inf start, the NaN rule (`v > m || isnan(v)`: the last NaN wins) and
the index of an all -inf window follow PyTorch's kernels, so values and indices match bit for bit.

nn.MaxPool1d / AvgPool1d / AdaptiveAvgPool1d trace to their 2d ops over an unsqueezed view and
global average pooling traces to `mean`; the 1d ops are registered all the same, since the same
code serves any number of spatial dims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from stitchcuda.agents.coder.codegen import C_TYPES, KernelArg
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, OutSpec, per_element

FLOATS = ("float32", "float16", "bfloat16")
INT32_LIMIT = 2**31 - 1
MAX_UNROLL = 128  # window elements spelled out in full


@dataclass(frozen=True)
class Dim:
    """One spatial dimension of the pooling window."""

    size: int  # input extent
    out: int  # output extent
    step: int  # element stride of the input in memory
    kernel: int = 1
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    adaptive: bool = False

    @property
    def lo_check(self) -> bool:
        """Some window starts before the input (padding)."""
        return not self.adaptive and self.pad > 0

    @property
    def hi_check(self) -> bool:
        """Some window runs past the input's end (padding or ceil_mode)."""
        last = (self.out - 1) * self.stride - self.pad + (self.kernel - 1) * self.dilation
        return not self.adaptive and last >= self.size


@dataclass(frozen=True)
class Pool:
    kind: str  # "max" or "avg"
    dims: tuple[Dim, ...]
    count_include_pad: bool = True
    divisor: int | None = None  # divisor_override
    # The input and output are stored channels-last, N, spatial..., C (planner.channels_last_convs):
    # the channel is an output's innermost coordinate, so a warp reads adjacent channels.
    channels_last: bool = False


# ---------------------------------------------------------------------------------------------
# Arguments


def int_args(value: object, nd: int, what: str, default: list[int] | None = None) -> list[int]:
    """An int[nd] argument as torch expands it: a scalar or one value stands for every dim."""
    if isinstance(value, bool):
        raise NotSupported(f"{what}={value!r} is not an int list")
    if isinstance(value, int):
        return [value] * nd
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise NotSupported(f"{what}={value!r} is not an int list")
    if not value and default is not None:
        return list(default)
    if len(value) == 1:
        return [value[0]] * nd
    if len(value) != nd:
        raise NotSupported(f"{what}={value!r} does not have {nd} values")
    return list(value)


def unpadded_avg_window(args: dict, nd: int) -> tuple[list[int], list[int]] | None:
    """(kernel, stride) of an average pool's arguments, read as its emitter reads them, where it has
    no padding and no divisor override (the pools the planner's rewrites may move or fold); else None."""
    try:
        kernel = int_args(args.get("kernel_size"), nd, "kernel_size")
        stride = int_args(args.get("stride", []), nd, "stride", default=kernel)
        padding = int_args(args.get("padding", 0), nd, "padding")
    except NotSupported:
        return None
    if any(padding) or args.get("divisor_override") is not None:
        return None
    return kernel, stride


def _output_extent(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """pooling_output_shape from ATen's Pool.h."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _source(ctx: EmitContext, nd: int) -> Operand:
    src = ctx.args.get("self")
    if not isinstance(src, Operand):
        raise NotSupported("the input is not a tensor")
    if src.dtype not in FLOATS:
        raise NotSupported(f"dtype {src.dtype} is not supported (fp32/fp16/bf16 only)")
    if len(src.shape) < nd + 1:
        raise NotSupported(f"a {nd}d pool needs at least {nd + 1} dims, got {list(src.shape)}")
    if _channels_last(ctx) and len(src.shape) != nd + 2:
        raise NotSupported(f"a channels-last {nd}d pool of {list(src.shape)}")
    if any(n <= 0 for n in _spatial(ctx, src, nd)[0]):
        raise NotSupported(f"empty spatial dims {list(src.shape)}")
    return src


def _channels_last(ctx: EmitContext) -> bool:
    return bool(ctx.args.get("channels_last"))


def _spatial(ctx: EmitContext, src: Operand, nd: int) -> tuple[list[int], list[int]]:
    """The input's spatial extents and strides: its last nd dims, or channels-last the nd before C."""
    if _channels_last(ctx):
        return list(src.shape[1 : 1 + nd]), list(src.strides[1 : 1 + nd])
    return list(src.shape[-nd:]), list(src.strides[-nd:])


def _results(ctx: EmitContext, src: Operand, spatial: list[int], with_indices: bool) -> list[OutSpec | None]:
    """The used results [values, indices], checked against the shape computed from the args."""
    want = (*src.shape[: len(src.shape) - len(spatial)], *spatial)
    if _channels_last(ctx):
        want = (src.shape[0], *spatial, src.shape[-1])
    outs = list(ctx.outputs) + [None] * (2 - len(ctx.outputs))
    if not with_indices and len(ctx.outputs) != 1:
        raise NotSupported(f"expected one result, the node has {len(ctx.outputs)}")
    for spec, dtype in zip(outs, (src.dtype, "int64"), strict=True):
        if spec is None:
            continue
        if spec.shape != want:
            raise NotSupported(f"output shape {list(spec.shape)} differs from the computed {list(want)}")
        if spec.dtype != dtype:
            raise NotSupported(f"result dtype {spec.dtype}, expected {dtype}")
    if outs[0] is None and outs[1] is None:
        raise NotSupported("no result of the pool is used")
    return outs


def _windowed(ctx: EmitContext, nd: int, kind: str, with_indices: bool) -> Kernel:
    """max_pool{nd}d[_with_indices] and avg_pool{nd}d."""
    a = ctx.args
    src = _source(ctx, nd)
    kernel = int_args(a.get("kernel_size"), nd, "kernel_size")
    stride = int_args(a.get("stride", []), nd, "stride", default=kernel)
    pad = int_args(a.get("padding", 0), nd, "padding")
    dilation = int_args(a.get("dilation", 1), nd, "dilation") if kind == "max" else [1] * nd
    ceil_mode = a.get("ceil_mode", False)
    if not isinstance(ceil_mode, bool):
        raise NotSupported(f"ceil_mode={ceil_mode!r}")
    if min(kernel + stride + dilation) <= 0 or min(pad) < 0:
        raise NotSupported(f"kernel {kernel}, stride {stride}, padding {pad}, dilation {dilation}")
    include_pad = a.get("count_include_pad", True)
    divisor = a.get("divisor_override")
    if kind == "avg" and (
        not isinstance(include_pad, bool)
        or divisor is not None
        and (type(divisor) is not int or divisor == 0)
    ):
        raise NotSupported(f"count_include_pad={include_pad!r}, divisor_override={divisor!r}")
    sizes, steps = _spatial(ctx, src, nd)
    spatial = [_output_extent(*v, ceil_mode) for v in zip(sizes, kernel, stride, pad, dilation, strict=True)]
    if min(spatial) <= 0:
        raise NotSupported(f"computed output extents {spatial} (input {sizes}) are empty")
    outs = _results(ctx, src, spatial, with_indices)
    dims = tuple(
        Dim(n, o, s, k, st, p, d)
        for n, o, s, k, st, p, d in zip(
            sizes, spatial, steps, kernel, stride, pad, dilation, strict=True
        )
    )
    pool = Pool(kind, dims, include_pad, divisor, _channels_last(ctx))
    window = "x".join(map(str, kernel)) + f"/{'x'.join(map(str, stride))}"
    return _kernel(ctx, src, outs, pool, f"{ctx.node['op']} {window} {list(src.shape)} -> {spatial}")


def _adaptive(ctx: EmitContext, nd: int, kind: str) -> Kernel:
    """adaptive_{avg,max}_pool{nd}d: window o covers [floor(o*I/O), ceil((o+1)*I/O))."""
    src = _source(ctx, nd)
    spatial = int_args(ctx.args.get("output_size"), nd, "output_size")
    if min(spatial) <= 0:
        raise NotSupported(f"output_size={spatial}")
    outs = _results(ctx, src, spatial, kind == "max")
    sizes, steps = _spatial(ctx, src, nd)
    dims = tuple(Dim(n, o, s, adaptive=True) for n, o, s in zip(sizes, spatial, steps, strict=True))
    pool = Pool(kind, dims, channels_last=_channels_last(ctx))
    return _kernel(ctx, src, outs, pool, f"{ctx.node['op']} {list(src.shape)} -> {spatial}")


# ---------------------------------------------------------------------------------------------
# Code


def _window(i: int, dims: tuple[Dim, ...], inner: list[str], idx: str) -> list[str]:
    """The loop over dim i of the window around inner; p{i} is the input coordinate."""
    d = dims[i]
    if d.adaptive:
        head = [f"for ({idx} p{i} = s{i}; p{i} < e{i}; ++p{i}) {{"]
    else:
        # Unrolled (every load in flight at once) unless the window is too big to spell out.
        volume = 1
        for inside in dims[i:]:
            volume *= inside.kernel
        head = ["#pragma unroll" if volume <= MAX_UNROLL else "#pragma unroll 1"]
        head += [f"for (int k{i} = 0; k{i} < {d.kernel}; ++k{i}) {{"]
        head += [f"  const {idx} p{i} = s{i} + k{i} * {d.dilation};"]
        checks = ([f"p{i} < 0"] if d.lo_check else []) + ([f"p{i} >= {d.size}"] if d.hi_check else [])
        if checks:
            head += [f"  if ({' || '.join(checks)}) continue;"]
    return head + [f"  {line}" for line in inner] + ["}"]


def _body(pool: Pool, src: Operand, idx: str, values: bool, indices: bool, prologue: bool = False) -> list[str]:
    """Statements computing output o: its coordinates o{i}, the window, the reduction, the stores.
    With `prologue`, x is a loader: x(e) computes element e (the pool's input is never stored)."""

    def read(offset: str) -> str:
        return f"x({offset})" if prologue else f"sc_to_f(x[{offset}])"

    dims, nd = pool.dims, len(pool.dims)
    lines = [f"{idx} r = o;", f"{idx} base = {src.offset};"]
    if pool.channels_last:  # the channel first (innermost), then the window's position, then N
        lines += [f"base += (r % {src.shape[-1]}) * {src.strides[-1]};", f"r /= {src.shape[-1]};"]
    for i in reversed(range(nd)):
        lines += [f"const {idx} o{i} = r % {dims[i].out};", f"r /= {dims[i].out};"]
    # What is left of o is the plane: its start in the input, through the leading dims' strides.
    lines += ["(void)r;"]
    lead = list(zip(src.shape[:-nd], src.strides[:-nd], strict=True))
    if pool.channels_last:
        lead = [(src.shape[0], src.strides[0])]
    for k in reversed(range(len(lead))):
        n, s = lead[k]
        lines += [f"base += (r % {n}) * {s};", f"r /= {n};"] if k else [f"base += r * {s};"]
    for i, d in enumerate(dims):
        if d.adaptive:
            # ATen's START_IND / END_IND, in 64 bits: o * I can pass 2^31.
            lines += [f"const {idx} s{i} = ({idx})((int64_t)o{i} * {d.size} / {d.out});"]
            lines += [
                f"const {idx} e{i} = ({idx})((((int64_t)o{i} + 1) * {d.size} + {d.out - 1}) / {d.out});"
            ]
        else:
            lines += [f"const {idx} s{i} = o{i} * {d.stride} - {d.pad};"]
    plane_steps = [1] * nd  # index strides within one contiguous input plane (what torch returns)
    for i in reversed(range(nd - 1)):
        plane_steps[i] = plane_steps[i + 1] * dims[i + 1].size
    offset = " + ".join(["base", *(f"p{i} * {d.step}" for i, d in enumerate(dims))])
    flat = " + ".join(f"p{i} * {plane_steps[i]}" for i in range(nd))
    if pool.kind == "max":
        lines += ["float m = -INFINITY;"]
        if indices:
            # The index of an all -inf window: the first in-bounds position, as ATen's kernels.
            first = []
            for i, d in enumerate(dims):
                if d.lo_check:
                    lines += [
                        f"const {idx} a{i} = s{i} < 0 ? s{i} + (-s{i} + {d.dilation - 1}) / {d.dilation} * {d.dilation} : s{i};"
                    ]
                    first.append(f"a{i} * {plane_steps[i]}")
                else:
                    first.append(f"s{i} * {plane_steps[i]}")
            lines += [f"{idx} arg = {' + '.join(first)};"]
            inner = [
                f"const float v = {read(offset)};",
                f"if (v > m || v != v) {{ m = v; arg = {flat}; }}",
            ]
        else:
            inner = [f"const float v = {read(offset)};", "if (v > m || v != v) m = v;"]
    else:
        lines += ["float acc = 0.0f;"]
        inner = [f"acc += {read(offset)};"]
    for i in reversed(range(nd)):
        inner = _window(i, dims, inner, idx)
    lines += inner
    if pool.kind == "max":
        result = "m"
    elif dims[0].adaptive:
        lines += ["float mean = acc;"] + [f"mean /= (float)(e{i} - s{i});" for i in range(nd)]
        result = "mean"
    else:
        lines += _avg_divisor(pool, idx)
        result = "(empty ? 0.0f : acc / (float)div)"
    if values:
        lines += [f"y[o] = sc_from_f<{C_TYPES[src.dtype]}>({result});"]
    if indices:
        lines += ["ix[o] = (int64_t)arg;"]
    return lines


def _avg_divisor(pool: Pool, idx: str) -> list[str]:
    """`div` and `empty` for avg_pool, as ATen: the window clipped to input+padding, or to the input."""
    lines, included, inside = [], [], []
    for i, d in enumerate(pool.dims):
        if not (d.lo_check or d.hi_check):
            included.append(str(d.kernel))
            inside.append(str(d.kernel))
            continue
        lines += [
            f"const {idx} c{i} = (s{i} + {d.kernel} < {d.size + d.pad} ? s{i} + {d.kernel} : {d.size + d.pad}) - s{i};",
            f"const {idx} n{i} = (s{i} + {d.kernel} < {d.size} ? s{i} + {d.kernel} : {d.size}) - (s{i} > 0 ? s{i} : 0);",
        ]
        included.append(f"c{i}")
        inside.append(f"n{i}")
    empty = " || ".join(f"{n} <= 0" for n in inside if not n.isdigit()) or "false"
    if pool.divisor is not None:
        div = str(pool.divisor)
    else:
        div = " * ".join(included if pool.count_include_pad else inside)
    return lines + [f"const bool empty = {empty};", "(void)empty;", f"const int64_t div = {div};"]


# Windows reading one input element, on average, up to which a pool computes a prologue itself
# (3x3 stride 2: 2.25; 3x3 stride 1: 9, where storing the chain once is cheaper).
MAX_PROLOGUE_OVERLAP = 4.0


def _overlap(pool: Pool) -> float:
    """About how many windows read each input element (adaptive windows barely overlap)."""
    total = 1.0
    for d in pool.dims:
        if not d.adaptive:
            total *= max(1.0, d.kernel / d.stride)
    return total


def _kernel(ctx: EmitContext, src: Operand, outs: list[OutSpec | None], pool: Pool, note: str) -> Kernel:
    name = ctx.name
    values, indices = outs[0], outs[1] if len(outs) > 1 else None
    total = values.shape if values is not None else indices.shape  # type: ignore[union-attr]
    n_out = 1
    for n in total:
        n_out *= n
    span = src.offset + 1 + sum((n - 1) * abs(s) for n, s in zip(src.shape, src.strides, strict=True))
    # 32-bit coordinates where every offset fits: 64-bit division by a constant costs several times more.
    idx = "int" if max(span, n_out) <= INT32_LIMIT // 2 else "int64_t"
    ctype = C_TYPES[src.dtype]
    pro = ctx.prologue if ctx.prologue is not None and ctx.prologue.node == src.name else None
    if pro is not None and _overlap(pool) > MAX_PROLOGUE_OVERLAP:
        pro = None  # every element would be computed that many times: stored once is cheaper
    body = _body(pool, src, idx, values is not None, indices is not None, prologue=pro is not None)

    if pro is None:
        inputs = [KernelArg(src.name, src.dtype)]
        params = [f"const {ctype}* __restrict__ x"]
        raw = ["const void* in0_"]
        casts = [f"  const auto x = static_cast<const {ctype}*>(in0_);"]
    else:  # the pooled tensor's pointwise ops, computed as the windows read it
        inputs = list(pro.inputs)
        params = [f"const {name}_ld x"]
        raw = pro.params()
        casts = [f"  const auto x = {pro.construct(f'{name}_ld')};"]
        note += f", prologue {' -> '.join(pro.ops) or 'copy'} (not stored)"
    if pool.channels_last:
        note += ", channels-last"
    args = ["x"]
    outputs = []
    for spec, var, ptype in ((values, "y", ctype), (indices, "ix", "int64_t")):
        if spec is None:
            continue
        k = len(outputs)
        params.append(f"{ptype}* __restrict__ {var}")
        args.append(var)
        raw.append(f"void* out{k}_")
        casts.append(f"  const auto {var} = static_cast<{ptype}*>(out{k}_);")
        outputs.append(KernelArg(spec.name, spec.dtype))
    p, a, n = ", ".join(params), ", ".join(args), f"{name}_n"
    body_text = "\n".join(f"  {line}" for line in body)
    source = f"""
// {name}: {note}
static constexpr int64_t {n} = {n_out}LL;
{pro.loader(f"{name}_ld") if pro is not None else ""}
SC_INLINE void {name}_one({idx} o, {p}) {{
{body_text}
}}

{per_element(name, n, p, a, raw, casts, idx)}"""
    return Kernel(
        name=name,
        inputs=inputs,
        outputs=outputs,
        source=source,
        ops=[note],
        host=True,
    )


Emitter = Callable[[EmitContext], Kernel]

EMITTERS: dict[str, Emitter] = {
    **{f"max_pool{nd}d": partial(_windowed, nd=nd, kind="max", with_indices=False) for nd in (1, 2, 3)},
    **{
        f"max_pool{nd}d_with_indices": partial(_windowed, nd=nd, kind="max", with_indices=True)
        for nd in (1, 2, 3)
    },
    **{f"avg_pool{nd}d": partial(_windowed, nd=nd, kind="avg", with_indices=False) for nd in (1, 2, 3)},
    **{f"adaptive_max_pool{nd}d": partial(_adaptive, nd=nd, kind="max") for nd in (1, 2, 3)},
    "adaptive_avg_pool1d": partial(_adaptive, nd=1, kind="avg"),
    **{
        f"{p}adaptive_avg_pool{nd}d": partial(_adaptive, nd=nd, kind="avg")
        for nd in (2, 3)
        for p in ("", "_")
    },
}
