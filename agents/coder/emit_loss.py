"""Loss ops that trace to one aten node: nll_loss_forward (CrossEntropyLoss is _log_softmax + this),
smooth_l1_loss, huber_loss, mse_loss and l1_loss. (BCE and most others decompose into pointwise ops
and sum/mean, which other emitters cover.)

Each kernel is a `__host__ __device__` term functor giving element i's loss and weight; reduction
none writes the terms, mean/sum run a grid-stride block reduction of (loss, weight) into scratch
partials and a one-block final kernel (mean divides by numel, or by the weight total for nll).
"""

from __future__ import annotations

from collections.abc import Callable

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import C_TYPES, KernelArg, c_float
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, launchers

FLOATS = ("float32", "float16", "bfloat16")
BLOCK = 256

# Block sums, the partial/final/elementwise kernels and their CPU twin: cuda/loss.cuh.
_HEADER = cuda_text.load("loss.cuh")

# Elementwise losses: C body setting l from d = self - target (fp32), with the op's parameter p.
ELEMENTWISE: dict[str, tuple[str, str | None]] = {
    "mse_loss": ("l = d * d;", None),
    "l1_loss": ("l = fabsf(d);", None),
    # PyTorch: |d| < beta ? 0.5 d^2 / beta : |d| - 0.5 beta; beta == 0 is the L1 loss.
    "smooth_l1_loss": ("const float z = fabsf(d); l = z < p ? 0.5f * d * d / p : z - 0.5f * p;", "beta"),
    "huber_loss": ("const float z = fabsf(d); l = z < p ? 0.5f * d * d : p * (z - 0.5f * p);", "delta"),
}


def _float_operand(value: object, what: str) -> Operand:
    if not isinstance(value, Operand):
        raise NotSupported(f"{what} is not a tensor")
    if value.dtype not in FLOATS:
        raise NotSupported(f"{what} dtype {value.dtype} is not supported")
    if not value.contiguous:
        raise NotSupported(f"{what} is not contiguous")
    return value


def _reduction(ctx: EmitContext) -> int:
    r = ctx.args.get("reduction", 1)
    if r not in (0, 1, 2) or isinstance(r, bool):
        raise NotSupported(f"reduction={r!r}")
    return r


def _kernel(
    ctx: EmitContext, inputs: list[Operand], term: str, n: int, reduce: int, div: str, wout: bool, note: str
) -> Kernel:
    """The launcher around term struct `{name}_term` (built from `inputs` as a, b, c)."""
    name = ctx.name
    out = ctx.outputs[0]
    if out is None or out.dtype not in FLOATS:
        raise NotSupported("the loss result is not used or not a float")
    wspec = ctx.outputs[1] if wout and len(ctx.outputs) > 1 else None
    if wspec is not None and wspec.dtype not in FLOATS:
        raise NotSupported(f"total_weight dtype {wspec.dtype}")
    raw = [f"const void* in{i}_" for i in range(len(inputs))] + ["void* out0_"]
    casts = [
        f"  const auto {v} = static_cast<const {C_TYPES[op.dtype]}*>(in{i}_);"
        for i, (v, op) in enumerate(zip("abc", inputs, strict=False))
    ]
    to, tw = C_TYPES[out.dtype], C_TYPES[wspec.dtype] if wspec else "float"
    casts.append(f"  const auto y = static_cast<{to}*>(out0_);")
    outputs = [KernelArg(out.name, out.dtype)]
    if wspec is not None:
        raw.append("void* out1_")
        casts.append(f"  const auto yw = static_cast<{tw}*>(out1_);")
        outputs.append(KernelArg(wspec.name, wspec.dtype))
    else:
        casts.append(f"  {tw}* const yw = nullptr;")
    fields = ", ".join("abc"[: len(inputs)])
    casts.append(f"  const {name}_term f{{{fields}}};")
    scratch: list[tuple[str, int]] = []
    # Partials: one per resident block of the target (enough to stream, few enough for one final block).
    parts = ctx.target.sm_count * max(1, ctx.target.max_threads_per_sm // BLOCK)
    blocks = max(1, min(-(-n // BLOCK), parts))
    if reduce == 0:
        launch = f"  sc_loss_none<<<{blocks}, {BLOCK}, 0, stream>>>(f, {n}LL, y, yw);"
    else:
        raw.append("void* scratch0_")
        casts_dev = "  const auto part = static_cast<double*>(scratch0_);"
        scratch.append(("float64", 2 * blocks))
        launch = (
            f"{casts_dev}\n  sc_loss_partial<<<{blocks}, {BLOCK}, 0, stream>>>(f, {n}LL, part);\n"
            f"  sc_loss_final<<<1, {BLOCK}, 0, stream>>>(part, {blocks}LL, {div}, y, yw);"
        )
    members = "\n".join(f"  const {C_TYPES[op.dtype]}* {v};" for v, op in zip("abc", inputs, strict=False))
    source = f"""{_HEADER}
// {name}: {note}
struct {name}_term {{
{members}
  SC_INLINE void operator()(int64_t i, float& l, float& w) const {{
{term}
  }}
}};

{launchers(name, raw, casts, launch, f"  sc_loss_host(f, {n}LL, {reduce}, {div}, y, yw);")}"""
    return Kernel(
        name=name,
        inputs=[KernelArg(op.name, op.dtype) for op in inputs],
        outputs=outputs,
        source=source,
        ops=[note],
        host=True,
        scratch=scratch,
    )


def _elementwise(ctx: EmitContext) -> Kernel:
    op = ctx.node["op"]
    body, param = ELEMENTWISE[op]
    a = _float_operand(ctx.args.get("self"), "self")
    b = _float_operand(ctx.args.get("target"), "target")
    if a.shape != b.shape or a.dtype != b.dtype:
        raise NotSupported(f"self {list(a.shape)} {a.dtype} and target {list(b.shape)} {b.dtype} differ")
    reduce = _reduction(ctx)
    p = "0.0f"
    if param is not None:
        value = ctx.args.get(param, 1.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise NotSupported(f"{param}={value!r}")
        if op == "smooth_l1_loss" and value == 0:
            body = ELEMENTWISE["l1_loss"][0]
        p = c_float(value)
    term = f"    const float p = {p}; (void)p;\n    const float d = sc_to_f(a[i]) - sc_to_f(b[i]);\n    {body}\n    w = 1.0f;"
    n = a.numel
    if n == 0:
        raise NotSupported("empty input")
    div = c_float(float(n)) if reduce == 1 else "0.0f"
    note = f"{op} {list(a.shape)} reduction {reduce}"
    return _kernel(ctx, [a, b], term, n, reduce, div, False, note)


def _nll(ctx: EmitContext) -> Kernel:
    x = _float_operand(ctx.args.get("self"), "self")
    t = ctx.args.get("target")
    if not isinstance(t, Operand) or t.dtype != "int64" or not t.contiguous:
        raise NotSupported("target is not a contiguous int64 tensor")
    if len(x.shape) != 2 or tuple(t.shape) != x.shape[:1]:
        raise NotSupported(f"self {list(x.shape)} with target {list(t.shape)} (2-d input only)")
    weight = ctx.args.get("weight")
    inputs = [x, t]
    if weight is not None:
        weight = _float_operand(weight, "weight")
        if tuple(weight.shape) != x.shape[1:]:
            raise NotSupported(f"weight {list(weight.shape)}")
        inputs.append(weight)
    ignore = ctx.args.get("ignore_index", -100)
    if type(ignore) is not int:
        raise NotSupported(f"ignore_index={ignore!r}")
    reduce = _reduction(ctx)
    rows, classes = x.shape
    w = "sc_to_f(c[k])" if weight is not None else "1.0f"
    # Out-of-range targets (a device assert in PyTorch) give NaN rather than reading out of bounds.
    term = (
        f"    const int64_t k = b[i];\n"
        f"    if (k == {ignore}LL) {{ l = 0.0f; w = 0.0f; return; }}\n"
        f"    if (k < 0 || k >= {classes}LL) {{ l = NAN; w = NAN; return; }}\n"
        f"    w = {w};\n"
        f"    l = -w * sc_to_f(a[i * {classes}LL + k]);"
    )
    if rows == 0:
        raise NotSupported("empty batch")
    div = "-1.0f" if reduce == 1 else "0.0f"
    note = f"nll_loss_forward [{rows}, {classes}] reduction {reduce}" + (
        " weighted" if weight is not None else ""
    )
    return _kernel(ctx, inputs, term, rows, reduce, div, True, note)


Emitter = Callable[[EmitContext], Kernel]

EMITTERS: dict[str, Emitter] = {
    "nll_loss_forward": _nll,
    **{op: _elementwise for op in ELEMENTWISE},
}
