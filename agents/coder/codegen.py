"""CUDA code generation for pointwise fusion groups: one table, one walker, one emitter.

- POINTWISE maps an aten op to a C expression over fp32 operands (the table). Storage may be
  fp32, fp16, bf16 or bool; math is always fp32, as PyTorch's own kernels compute it ("opmath").
- `lower` is the walker: from each group output back to the group's inputs it evaluates every
  node at a linear index, turning broadcasts and views into index arithmetic, and gives each
  (node, index) pair one SSA variable.
- `render` is the emitter: a `__host__ __device__` chunk function holding the walker's
  statements, a grid-stride kernel with a vectorised main loop, and an `extern "C"` launcher that
  `stitchcuda.runtime` calls. With `host_entry=True` it also emits a CPU loop over the same chunk
  function, so tests can check the generated arithmetic against PyTorch without a GPU.

Shapes are compile-time constants: a kernel is generated for the shapes that were traced, and the
generated ModelNew checks them before every call.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.graph import (
    Node,
    by_name,
    contiguous_strides,
    is_contiguous,
    numel,
    ref_name,
    replay_view,
    restride,
)
from stitchcuda.types import FusionGroup

THREADS = 256
# Cap of the grid-stride launch, in blocks per SM. Measured on an H100 (fp32 relu over 6.4 GB, one
# 16-byte vector per thread and iteration): 32 blocks/SM reached 2.84 TB/s, 4096 (about one
# iteration per thread) 3.00 TB/s, as eager PyTorch. 32-byte vectors were slower for fp32.
BLOCKS_PER_SM = 4096
VECTOR_BYTES = 16  # bytes each thread loads per operand and iteration of the main loop

# int64 values (indices, positions, buckets) are computed in int64_t (INT64_POINTWISE).
# The narrow integers are stored weights (int8 weight-only quantisation: w.to(bf16) * scale) and codes.
C_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "bool": "bool", "int64": "int64_t",
           "int32": "int32_t", "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t"}
ITEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "bool": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
             "uint8": 1}
# Integer dtypes: computed in int64_t by INT64_POINTWISE, a narrower result wrapped to its width as
# PyTorch wraps it.
INTS = ("int64", "int32", "int16", "int8", "uint8")


class NotFusable(Exception):
    """This node or group cannot be emitted by the pointwise emitter; the message says why."""


# ---------------------------------------------------------------------------------------------
# The table


def c_float(value: Any) -> str:
    """A C float literal equal to float32(value), as PyTorch converts a Python scalar for fp32 math."""
    if isinstance(value, bool):
        return "1.0f" if value else "0.0f"
    with np.errstate(over="ignore"):
        f = float(np.float32(value))
    if math.isnan(f):
        return "NAN"
    if math.isinf(f):
        return "INFINITY" if f > 0 else "(-INFINITY)"
    text = str(np.float32(f))  # shortest text that reads back as the same float32
    if not any(c in text for c in ".en"):
        text += ".0"
    return f"({text}f)" if text.startswith("-") else f"{text}f"


class Operands:
    """What a table entry sees: `a.self`, `a.other`... are C expressions of fp32 values (a variable
    of the walker or a literal); `a.raw(name)` is the argument as traced (options, constants), and
    `a.raw("_dtype")` the node's own dtype."""

    def __init__(self, values: dict[str, str], raw: dict[str, Any]):
        self._values = values
        self._raw = raw

    def __getattr__(self, name: str) -> str:
        try:
            return self._values[name]
        except KeyError:
            raise NotFusable(f"argument {name}={self._raw.get(name)!r} is not a number or tensor") from None

    def raw(self, name: str) -> Any:
        return self._raw.get(name)

    def has(self, name: str) -> bool:
        return name in self._values


@dataclass(frozen=True)
class Op:
    """One table entry: which schema arguments are fp32 values, and the C expression over them."""

    operands: tuple[str, ...]
    render: Callable[[Operands], str]


# exp in the pointwise kernels through the SFU (__expf, as Triton lowers fp32 exp, so torch.compile's
# kernels do too): within a few ulp plus ~1.2 ulp per unit of |x|. Measured in the example's candidate
# on the H200: its kernel 107.6 -> 105.5 us (bench/results/2026-11-27-h200x2-level2-prologues-ab-c00260a.md;
# standalone 114.9 -> 103.8 with other changes, scripts/bench_pointwise.cu). "0" keeps the accurate expf.
FAST_EXP_ENV = "STITCHCUDA_FAST_EXP"
FAST_EXP_CALLS = ("sc_exp(", "sc_sigmoid_fast(", "sc_sigmoid_fdiv(")


def fast_exp_on() -> bool:
    return os.environ.get(FAST_EXP_ENV, "1") != "0"


def _exp(accurate: str = "expf") -> str:
    """The exp (or sigmoid) function the walker writes: `accurate`, or its SFU version (fast_math.cuh)."""
    return {"expf": "sc_exp", "sc_sigmoid": "sc_sigmoid_fast"}[accurate] if fast_exp_on() else accurate


def _t(template: str, *operands: str) -> Op:
    return Op(operands, lambda a: template.format(**{n: getattr(a, n) for n in operands}))


def _f(fn: Callable[[Operands], str], *operands: str) -> Op:
    return Op(operands, fn)


def _axpy(x: str, sign: str, y: str, alpha: Any) -> str:
    # PyTorch computes a + alpha * b; skip the multiply when alpha is 1 (exact either way).
    if alpha is None or alpha == 1:
        return f"({x} {sign} {y})"
    return f"({x} {sign} {c_float(alpha)} * {y})"


def _div(a: Operands) -> str:
    mode = a.raw("rounding_mode")
    if mode is None:
        return f"({a.self} / {a.other})"
    if mode == "trunc":
        return f"truncf({a.self} / {a.other})"
    if mode == "floor":
        return f"sc_div_floor({a.self}, {a.other})"
    raise NotFusable(f"rounding_mode={mode!r}")


def _pow(a: Operands) -> str:
    e = a.raw("exponent")
    if isinstance(e, int | float) and not isinstance(e, bool) and a.raw("self") is not None:
        x = a.self
        # The same special cases as PyTorch's pow_tensor_scalar kernel, so results match bit for bit.
        special = {
            2: f"({x} * {x})",
            3: f"({x} * {x} * {x})",
            0.5: f"sqrtf({x})",
            -0.5: f"(1.0f / sqrtf({x}))",
            -1: f"(1.0f / {x})",
            -2: f"(1.0f / ({x} * {x}))",
        }
        if e in special:
            return special[e]
    return f"powf({a.self}, {a.exponent})"


def _gelu(a: Operands) -> str:
    mode = a.raw("approximate") or "none"
    if mode == "none":
        return f"sc_gelu({a.self})"
    if mode == "tanh":
        return f"sc_gelu_tanh({a.self})"
    raise NotFusable(f"approximate={mode!r}")


def _logit(a: Operands) -> str:
    x = a.self
    if a.raw("eps") is not None:  # as PyTorch: clamped into [eps, 1 - eps], NaN kept
        lo, hi = c_float(a.raw("eps")), c_float(1.0 - a.raw("eps"))
        x = f"({x} < {lo} ? {lo} : ({x} > {hi} ? {hi} : {x}))"
    return f"logf({x} / (1.0f - {x}))"


def _bound(a: Operands, name: str, missing: str) -> str:
    return getattr(a, name) if a.raw(name) is not None else missing


def _clamp(a: Operands) -> str:
    return f"sc_clamp({a.self}, {_bound(a, 'min', '(-INFINITY)')}, {_bound(a, 'max', 'INFINITY')})"


def _to_copy(a: Operands) -> str:
    dtype = a.raw("dtype")
    if dtype is None or dtype == "float32":
        return a.self
    rounding = {"float16": "sc_round_half", "bfloat16": "sc_round_bf16", "bool": "sc_bool"}
    if dtype not in rounding:
        raise NotFusable(f"cast to {dtype}")
    return f"{rounding[dtype]}({a.self})"


# Each float storage's largest finite value (nan_to_num's default for +-inf) and the fp32 magnitude
# from which a value stored in it is inf: the chain before nan_to_num runs in fp32, where eager
# PyTorch would have stored each step in fp16 (65504 * 8 is inf there, and nan_to_num's to replace).
_FINITE = {"float32": (3.4028234663852886e38, "INFINITY"), "float16": (65504.0, "65520.0f"),
           "bfloat16": (3.3895313892515355e38, "3.3961775e38f")}


def _nan_to_num(a: Operands) -> str:
    if a.raw("_dtype") not in _FINITE:
        raise NotFusable(f"nan_to_num of {a.raw('_dtype')}")
    big, inf = _FINITE[a.raw("_dtype")]
    nan, pos, neg = (a.raw(k) for k in ("nan", "posinf", "neginf"))
    nan, pos, neg = c_float(nan or 0.0), c_float(big if pos is None else pos), c_float(-big if neg is None else neg)
    x = a.self
    return f"({x} != {x} ? {nan} : ({x} >= {inf} ? {pos} : ({x} <= -{inf} ? {neg} : {x})))"


def _cmp(op: str) -> Op:
    return _t(f"({{self}} {op} {{other}} ? 1.0f : 0.0f)", "self", "other")


_IDENTITY = _t("{self}", "self")

# aten overload packet -> C expression. Operands are fp32 values; helpers (sc_*) are in cuda/prelude.cuh.
POINTWISE: dict[str, Op] = {
    # arithmetic (Tensor and Scalar overloads share argument names)
    "add": _f(lambda a: _axpy(a.self, "+", a.other, a.raw("alpha")), "self", "other"),
    "sub": _f(lambda a: _axpy(a.self, "-", a.other, a.raw("alpha")), "self", "other"),
    "rsub": _f(lambda a: _axpy(a.other, "-", a.self, a.raw("alpha")), "self", "other"),
    "mul": _t("sc_mul_rn({self}, {other})", "self", "other"),  # rounded as ATen's mul (prelude.cuh)
    "div": _f(_div, "self", "other"),
    # (a float tensor's `//`: DETR's sine position embedding's dim_t // 2)
    "floor_divide": _t("sc_div_floor({self}, {other})", "self", "other"),
    "remainder": _t("sc_remainder({self}, {other})", "self", "other"),
    "fmod": _t("fmodf({self}, {other})", "self", "other"),
    "pow": _f(_pow, "self", "exponent"),
    "neg": _t("(-{self})", "self"),
    "abs": _t("fabsf({self})", "self"),
    "reciprocal": _t("(1.0f / {self})", "self"),
    "square": _t("sc_mul_rn({self}, {self})", "self"),
    "sqrt": _t("sqrtf({self})", "self"),
    "rsqrt": _t("(1.0f / sqrtf({self}))", "self"),
    "sign": _t("sc_sign({self})", "self"),
    "sgn": _t("sc_sign({self})", "self"),
    "floor": _t("floorf({self})", "self"),
    "ceil": _t("ceilf({self})", "self"),
    "trunc": _t("truncf({self})", "self"),
    "round": _t("nearbyintf({self})", "self"),  # half to even, as torch.round
    "frac": _t("({self} - truncf({self}))", "self"),
    "addcmul": _f(lambda a: _axpy(a.self, "+", f"({a.tensor1} * {a.tensor2})", a.raw("value")), "self", "tensor1", "tensor2"),
    "addcdiv": _f(lambda a: _axpy(a.self, "+", f"({a.tensor1} / {a.tensor2})", a.raw("value")), "self", "tensor1", "tensor2"),
    "lerp": _t("sc_lerp({self}, {end}, {weight})", "self", "end", "weight"),
    "maximum": _t("sc_max({self}, {other})", "self", "other"),
    "minimum": _t("sc_min({self}, {other})", "self", "other"),
    "fmax": _t("fmaxf({self}, {other})", "self", "other"),
    "fmin": _t("fminf({self}, {other})", "self", "other"),
    "atan2": _t("atan2f({self}, {other})", "self", "other"),
    "xlogy": _t("sc_xlogy({self}, {other})", "self", "other"),
    "hypot": _t("hypotf({self}, {other})", "self", "other"),
    "copysign": _t("copysignf({self}, {other})", "self", "other"),
    # transcendental
    "exp": _f(lambda a: f"{_exp()}({a.self})", "self"),
    "exp2": _t("exp2f({self})", "self"),
    "expm1": _t("expm1f({self})", "self"),
    "log": _t("logf({self})", "self"),
    "log2": _t("log2f({self})", "self"),
    "log10": _t("log10f({self})", "self"),
    "log1p": _t("log1pf({self})", "self"),
    "sin": _t("sinf({self})", "self"),
    "cos": _t("cosf({self})", "self"),
    "tan": _t("tanf({self})", "self"),
    "asin": _t("asinf({self})", "self"),
    "acos": _t("acosf({self})", "self"),
    "atan": _t("atanf({self})", "self"),
    "sinh": _t("sinhf({self})", "self"),
    "cosh": _t("coshf({self})", "self"),
    "tanh": _t("tanhf({self})", "self"),
    "asinh": _t("asinhf({self})", "self"),
    "acosh": _t("acoshf({self})", "self"),
    "atanh": _t("atanhf({self})", "self"),
    "erf": _t("erff({self})", "self"),
    "erfc": _t("erfcf({self})", "self"),
    "erfinv": _t("sc_erfinv({self})", "self"),
    "lgamma": _t("lgammaf({self})", "self"),
    "digamma": _t("sc_digamma({self})", "self"),
    "logit": _f(_logit, "self"),
    "sinc": _t("({self} == 0.0f ? 1.0f : sinf(3.14159265358979323846f * {self}) / "
               "(3.14159265358979323846f * {self}))", "self"),
    # activations, written as PyTorch's CUDA kernels compute them
    "relu": _t("({self} < 0.0f ? 0.0f : {self})", "self"),  # NaN passes through, as clamp_min(0)
    "leaky_relu": _t("({self} > 0.0f ? {self} : {self} * {negative_slope})", "self", "negative_slope"),
    "_prelu_kernel": _t("({self} > 0.0f ? {self} : {weight} * {self})", "self", "weight"),
    "sigmoid": _f(lambda a: f"{_exp('sc_sigmoid')}({a.self})", "self"),
    "gelu": _f(_gelu, "self"),
    "silu": _f(lambda a: f"({a.self} / (1.0f + {_exp()}(-{a.self})))", "self"),
    "mish": _f(lambda a: f"({a.self} * tanhf(log1pf({_exp()}({a.self}))))", "self"),
    "softplus": _f(lambda a: f"({a.self} * {a.beta} > {a.threshold} ? {a.self} : "
                             f"log1pf({_exp()}({a.self} * {a.beta})) / {a.beta})", "self", "beta", "threshold"),
    "elu": _t(
        "({self} <= 0.0f ? expm1f({self} * {input_scale}) * ({alpha} * {scale}) : {self} * {scale})",
        "self", "alpha", "scale", "input_scale",
    ),
    "celu": _t("({self} <= 0.0f ? expm1f({self} / {alpha}) * {alpha} : {self})", "self", "alpha"),
    "selu": _t(
        "({self} <= 0.0f ? expm1f({self}) * (1.6732632423543772f * 1.0507009873554805f) : {self} * 1.0507009873554805f)",
        "self",
    ),
    "hardtanh": _t("sc_clamp({self}, {min_val}, {max_val})", "self", "min_val", "max_val"),
    "relu6": _t("sc_clamp({self}, 0.0f, 6.0f)", "self"),
    "hardsigmoid": _t("(sc_clamp({self} + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f))", "self"),
    "hardswish": _t("({self} * sc_clamp({self} + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f))", "self"),
    "hardshrink": _t("(({self} >= -{lambd} && {self} <= {lambd}) ? 0.0f : {self})", "self", "lambd"),
    "softshrink": _t(
        "({self} > {lambd} ? {self} - {lambd} : ({self} < -{lambd} ? {self} + {lambd} : 0.0f))", "self", "lambd"
    ),
    "threshold": _t("({self} <= {threshold} ? {value} : {self})", "self", "threshold", "value"),
    "clamp": _f(_clamp, "self", "min", "max"),
    "clip": _f(_clamp, "self", "min", "max"),
    "clamp_min": _t("sc_clamp({self}, {min}, INFINITY)", "self", "min"),
    "clamp_max": _t("sc_clamp({self}, (-INFINITY), {max})", "self", "max"),
    # comparisons and selection; a bool is 1.0f or 0.0f in fp32 math
    "eq": _cmp("=="),
    "ne": _cmp("!="),
    "gt": _cmp(">"),
    "ge": _cmp(">="),
    "lt": _cmp("<"),
    "le": _cmp("<="),
    "logical_not": _t("({self} == 0.0f ? 1.0f : 0.0f)", "self"),
    "logical_and": _t("(({self} != 0.0f && {other} != 0.0f) ? 1.0f : 0.0f)", "self", "other"),
    "logical_or": _t("(({self} != 0.0f || {other} != 0.0f) ? 1.0f : 0.0f)", "self", "other"),
    "logical_xor": _t("((({self} != 0.0f) != ({other} != 0.0f)) ? 1.0f : 0.0f)", "self", "other"),
    # On bool tensors the bitwise ops are the logical ones (masks: ~torch.tril(...)); on int64 ones
    # INT64_POINTWISE's.
    "bitwise_not": _t("({self} == 0.0f ? 1.0f : 0.0f)", "self"),
    "bitwise_and": _t("(({self} != 0.0f && {other} != 0.0f) ? 1.0f : 0.0f)", "self", "other"),
    "bitwise_or": _t("(({self} != 0.0f || {other} != 0.0f) ? 1.0f : 0.0f)", "self", "other"),
    "bitwise_xor": _t("((({self} != 0.0f) != ({other} != 0.0f)) ? 1.0f : 0.0f)", "self", "other"),
    "isnan": _t("({self} != {self} ? 1.0f : 0.0f)", "self"),
    "nan_to_num": _f(_nan_to_num, "self"),
    "isinf": _t("(fabsf({self}) == INFINITY ? 1.0f : 0.0f)", "self"),
    "where": _t("({condition} != 0.0f ? {self} : {other})", "condition", "self", "other"),
    "masked_fill": _t("({mask} != 0.0f ? {value} : {self})", "self", "mask", "value"),
    # copies and casts
    "_to_copy": _f(_to_copy, "self"),
    "clone": _IDENTITY,
    "copy_": _t("{src}", "src"),
    "copy": _t("{src}", "src"),  # functionalized copy_: src broadcast to self's shape (self's values unread)
    "lift_fresh_copy": _IDENTITY,
    "alias_copy": _IDENTITY,
    "detach_copy": _IDENTITY,
    # constants made in forward (zeros_like, torch.where(c, x, 0.0) -> scalar_tensor)
    "zeros_like": _t("0.0f"),
    "ones_like": _t("1.0f"),
    "full_like": _t("{fill_value}", "fill_value"),
    "zeros": _t("0.0f"),
    "ones": _t("1.0f"),
    "full": _t("{fill_value}", "fill_value"),
    "scalar_tensor": _t("{s}", "s"),
    "fill": _t("{value}", "value"),
}  # fmt: skip




def c_int(value: Any) -> str:
    """A C int64 literal for a scalar of integer math (a float scalar only where it is whole)."""
    if isinstance(value, float):
        if not value.is_integer():
            raise NotFusable(f"the scalar {value} in int64 arithmetic")
        value = int(value)
    v = int(value)
    if not -(2**63) <= v < 2**63:
        raise NotFusable(f"the scalar {value} does not fit int64")
    return f"(-{-v}LL)" if v < 0 else f"{v}LL"


def _axpy_int(x: str, sign: str, y: str, alpha: Any) -> str:
    if alpha is None or alpha == 1:
        return f"({x} {sign} {y})"
    return f"({x} {sign} {c_int(alpha)} * {y})"


def _div_int(a: Operands) -> str:
    mode = a.raw("rounding_mode")
    if mode == "trunc":
        return f"sc_div_trunc_i64({a.self}, {a.other})"
    if mode == "floor":
        return f"sc_div_floor_i64({a.self}, {a.other})"
    raise NotFusable("true division has a float result")  # (an int64 node never holds one)


def _clamp_int(a: Operands) -> str:
    x = a.self
    if a.raw("min") is not None:
        x = f"sc_max_i64({x}, {a.min})"
    if a.raw("max") is not None:
        x = f"sc_min_i64({x}, {a.max})"
    return x


def _to_int64(a: Operands) -> str:
    if a.raw("dtype") not in INTS:
        raise NotFusable(f"a cast to {a.raw('dtype')} in int64 arithmetic")
    return f"(int64_t)({a.self})"  # toward zero, as PyTorch's cast from a float


_INT_CONST = {0: _t("((int64_t)0)"), 1: _t("((int64_t)1)")}

# Integer math in int64_t, as PyTorch does it (wrapping, exact at any magnitude): int64 results,
# and comparisons of int64 tensors (whose results are bools, so the fp32 table's comparisons serve
# with integer operands). Operands are int64_t expressions; a bool operand is cast to 0 or 1.
INT64_POINTWISE: dict[str, Op] = {
    "add": _f(lambda a: _axpy_int(a.self, "+", a.other, a.raw("alpha")), "self", "other"),
    "sub": _f(lambda a: _axpy_int(a.self, "-", a.other, a.raw("alpha")), "self", "other"),
    "rsub": _f(lambda a: _axpy_int(a.other, "-", a.self, a.raw("alpha")), "self", "other"),
    "mul": _t("({self} * {other})", "self", "other"),
    "neg": _t("(-{self})", "self"),
    "abs": _t("sc_abs_i64({self})", "self"),
    "sign": _t("((int64_t)((0 < {self}) - ({self} < 0)))", "self"),
    "square": _t("({self} * {self})", "self"),
    "div": _f(_div_int, "self", "other"),
    "floor_divide": _t("sc_div_floor_i64({self}, {other})", "self", "other"),
    "remainder": _t("sc_remainder_i64({self}, {other})", "self", "other"),
    "fmod": _t("sc_div_rem_i64({self}, {other})", "self", "other"),
    "maximum": _t("sc_max_i64({self}, {other})", "self", "other"),
    "minimum": _t("sc_min_i64({self}, {other})", "self", "other"),
    "clamp": _f(_clamp_int, "self", "min", "max"),
    "clip": _f(_clamp_int, "self", "min", "max"),
    "clamp_min": _t("sc_max_i64({self}, {min})", "self", "min"),
    "clamp_max": _t("sc_min_i64({self}, {max})", "self", "max"),
    "bitwise_and": _t("({self} & {other})", "self", "other"),
    "bitwise_or": _t("({self} | {other})", "self", "other"),
    "bitwise_xor": _t("({self} ^ {other})", "self", "other"),
    "bitwise_not": _t("(~{self})", "self"),
    "__lshift__": _t("sc_shl_i64({self}, {other})", "self", "other"),
    "__rshift__": _t("sc_shr_i64({self}, {other})", "self", "other"),
    "bitwise_left_shift": _t("sc_shl_i64({self}, {other})", "self", "other"),
    "bitwise_right_shift": _t("sc_shr_i64({self}, {other})", "self", "other"),
    "where": _t("({condition} != 0 ? {self} : {other})", "condition", "self", "other"),
    "masked_fill": _t("({mask} != 0 ? {value} : {self})", "self", "mask", "value"),
    "_to_copy": _f(_to_int64, "self"),
    "clone": _IDENTITY,
    "copy_": _t("{src}", "src"),
    "copy": _t("{src}", "src"),
    "lift_fresh_copy": _IDENTITY,
    "alias_copy": _IDENTITY,
    "detach_copy": _IDENTITY,
    "zeros_like": _INT_CONST[0],
    "ones_like": _INT_CONST[1],
    "zeros": _INT_CONST[0],
    "ones": _INT_CONST[1],
    "full_like": _t("{fill_value}", "fill_value"),
    "full": _t("{fill_value}", "fill_value"),
    "scalar_tensor": _t("{s}", "s"),
    "fill": _t("{value}", "value"),
}  # fmt: skip

# The fp32 table's comparisons, which read int64 operands as integers when both sides are integers.
_COMPARISONS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})


def int_math(node: Node, dtype_of: Callable[[str], str | None]) -> bool:
    """Whether `node` is integer arithmetic: an int64 result, or a comparison whose tensor operands
    are int64 (or bool) and whose scalars are integers, so PyTorch compares integers exactly."""
    if node.get("dtype") in INTS:
        return True
    if node.get("op") not in _COMPARISONS:
        return False
    dtypes, scalars = [], []
    for arg in POINTWISE[node["op"]].operands:
        value = node["args"].get(arg)
        if (src := ref_name(value)) is not None:
            dtypes.append(dtype_of(src))
        elif value is not None:
            scalars.append(value)
    return (any(d in INTS for d in dtypes) and all(d in (*INTS, "bool") for d in dtypes)
            and all(isinstance(v, bool | int) for v in scalars))



def pointwise_support(node: Node) -> str | None:
    """Why the table cannot emit this node, or None when it can (dtypes included)."""
    dtype = node.get("dtype")
    table = INT64_POINTWISE if dtype in INTS else POINTWISE
    op = table.get(node.get("op", ""))
    if op is None and dtype in INTS and node.get("op") in POINTWISE and not node.get("view"):
        return f"{node['target']}: dtype {dtype} is not supported by the pointwise emitter yet"
    if op is None or node.get("view"):
        return f"{node.get('target') or node.get('op')}: not supported by the built-in coder yet"
    if dtype not in C_TYPES:
        return f"{node['target']}: dtype {dtype} is not supported by the pointwise emitter yet"

    values = {}
    for arg in op.operands:
        value = node["args"].get(arg)
        if ref_name(value) is not None:
            values[arg] = "x"
        elif isinstance(value, bool | int | float):
            try:
                values[arg] = c_int(value) if dtype in INTS else c_float(value)
            except NotFusable as e:
                return f"{node['target']}: {e}"
    try:
        op.render(Operands(values, {**node["args"], "_dtype": node.get("dtype")}))
    except NotFusable as e:
        return f"{node['target']}: {e}"
    return None


# ---------------------------------------------------------------------------------------------
# The walker


@dataclass(frozen=True)
class KernelArg:
    name: str  # graph node read or written
    dtype: str
    direct: bool = False  # read at the kernel's own index: loaded as a vector in the main loop


@dataclass
class PointwiseKernel:
    name: str
    shape: list[int]
    inputs: list[KernelArg]
    outputs: list[KernelArg]
    body: list[str]  # C statements for element `i`, lane `l` of the chunk
    ops: list[str] = field(default_factory=list)  # aten ops it computes, in order (for notes)
    # Inputs read through a broadcast whose index runs with `i` (a bias over the innermost
    # dimension): loaded once a chunk as a vector where the run is long enough (lane_loads).
    hoisted: list[HoistedLoad] = field(default_factory=list)

    @property
    def numel(self) -> int:
        return numel(self.shape)

    @property
    def vec(self) -> int:
        """Elements per thread and iteration: VECTOR_BYTES of the widest type read or written at `i`."""
        widest = max(ITEM_SIZE[a.dtype] for a in self.outputs + [a for a in self.inputs if a.direct])
        return max(1, VECTOR_BYTES // widest)


@dataclass(frozen=True)
class HoistedLoad:
    """in{k} read at index variable `var`, which equals `base_expr` + l for lane l of a chunk whose
    first element `base` is a multiple of any power of two up to `run`: one vector load a chunk
    (where run covers the chunk's VEC) in place of VEC scalar ones."""

    k: int
    var: str
    ctype: str
    base_expr: str  # the index at element `base`
    lane_expr: str  # the index at element `base + l` (for chunks longer than the run)
    run: int


def lane_loads_enabled() -> bool:
    """Hoisted broadcast loads (HoistedLoad): STITCHCUDA_PW_VEC_BROADCAST=1 turns them on, "0" off;
    unset, they come with the Triton-like kernel shape (pw_shape, the default) and are off with the
    grid-stride one (where, alone, they gained nothing: 109.5 against 107.4 us at 1eac20b)."""
    flag = os.environ.get("STITCHCUDA_PW_VEC_BROADCAST")
    return flag == "1" if flag in ("0", "1") else pw_shape() == "triton"


# The pointwise kernel's shape. "triton" (the default): as torch.compile's Triton kernels for the
# same chains (XBLOCK=1024, 4 warps): 128-thread blocks, triton_vectors() vectors a thread TRITON_THREADS
# vectors apart (each load instruction coalesced across the block), all of a thread's loads issued
# before its arithmetic, an exact grid with no loop, 32-bit chunk indices where the element count
# allows, hoisted broadcast loads, and __fdividef in the sigmoid (fast_div.cuh). "grid-stride": 256-
# thread blocks, one vector a thread and iteration of a grid-stride loop (sc_grid), as before.
# On the H200 (bench/results/2026-11-29-h200-depthwise-pointwise-d3ab070.md): the example's kernel
# 97.7 us against the grid-stride shape's 106.1 and torch.compile's 99.4 (scripts/bench_pointwise.py,
# L2 flushed), 97.6 us GPU time in its candidate against 106.4; level 1's twelve activations
# (19-22, 25-32) all correct, each 0.2-0.6% less GPU time than in the grid-stride shape.
PW_SHAPE_ENV = "STITCHCUDA_PW_SHAPE"
PW_SHAPES = ("grid-stride", "triton")
TRITON_THREADS = 128
# Vectors a thread: 2 as Triton's XBLOCK=1024. STITCHCUDA_PW_VECTORS=1 gives one a thread (twice the
# blocks): on the H200, ReLU over 1.6e9 floats took 3024 us that way against 3056 with two and
# torch.relu's 3063, 67M floats 135.5 against 137.3 and 139.6 (scripts/probe_stream_hints.py,
# bench/results/2026-12-01-h200-level3-rest-hardening-3502def.md); in candidates the gain was 0.1-1%,
# inside noise, so the default stays 2.
PW_VECTORS_ENV = "STITCHCUDA_PW_VECTORS"


# Blocks an SM the Triton-like kernel asks ptxas to fit (__launch_bounds__'s second argument): unset,
# none (ptxas picks the registers; the example's chain takes 41, so 10 of 16 blocks fit an SM).
# STITCHCUDA_PW_MINB=N caps the registers so N blocks fit; an A/B knob, measured before it is a default.
PW_MINB_ENV = "STITCHCUDA_PW_MINB"


def triton_min_blocks() -> int:
    """STITCHCUDA_PW_MINB as blocks an SM (0: no cap)."""
    raw = os.environ.get(PW_MINB_ENV) or "0"
    if not raw.isdigit() or int(raw) > 32:
        raise ValueError(f"{PW_MINB_ENV}={raw!r}: expected 0 to 32 blocks an SM")
    return int(raw)


def triton_vectors() -> int:
    """Vectors a thread of the Triton-like shape (STITCHCUDA_PW_VECTORS: 1, 2 or 4; unset: 2)."""
    raw = os.environ.get(PW_VECTORS_ENV) or "2"
    if raw not in ("1", "2", "4"):
        raise ValueError(f"{PW_VECTORS_ENV}={raw!r}: expected 1, 2 or 4")
    return int(raw)


def pw_shape() -> str:
    """The pointwise kernel shape STITCHCUDA_PW_SHAPE asks for (one of PW_SHAPES); unset: triton."""
    shape = os.environ.get(PW_SHAPE_ENV) or "triton"
    if shape not in PW_SHAPES:
        raise ValueError(f"{PW_SHAPE_ENV}={shape!r}: expected one of {', '.join(PW_SHAPES)}")
    return shape


def _lane_run(shape: Sequence[int], strides: Sequence[int], offset: int, cap: int = 16) -> int:
    """The longest power-of-two run R (<= cap) such that, for every i that is a multiple of R, the
    index of element i + l (row-major in `shape`, laid out by `strides` and `offset`) is that of i
    plus l, for l < R, and a multiple of R at i: 1 where there is none."""
    dims = [(size, st) for size, st in zip(shape, strides, strict=True) if size != 1]
    if not dims or dims[-1][1] != 1:
        return 1
    run = cap
    for _size, st in dims[:-1]:
        while run > 1 and st % run:
            run //= 2
    while run > 1 and (dims[-1][0] % run or offset % run):
        run //= 2
    return run


LANES = 16  # the most elements a vector holds (16 bytes of 1-byte elements)


def lane_invariant_on() -> bool:
    """Loads the lanes of a vector share read once from base (_lane_invariant); STITCHCUDA_LANE_INVARIANT=0
    reads them lane by lane, as before 2026-12-01, for A/B timing."""
    return os.environ.get("STITCHCUDA_LANE_INVARIANT", "1") != "0"


def _lane_invariant(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether elements base .. base + VEC - 1 (base a multiple of VEC <= LANES) all read the same
    element through `strides`: the innermost dimensions, over a multiple of LANES elements, are
    broadcast (stride 0)."""
    span = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size == 1:
            continue
        if stride != 0:
            break
        span *= size
    return span > 1 and span % LANES == 0


@dataclass(frozen=True)
class _Index:
    var: str  # C expression: a linear index into a row-major tensor of `shape`
    shape: tuple[int, ...]


class _Lowering:
    def __init__(self, graph: Sequence[Node], group: FusionGroup, nodes: dict[str, Node] | None = None):
        self.nodes = nodes if nodes is not None else by_name(graph)
        self.inside = set(group.nodes)
        self.lines: list[str] = []
        self.values: dict[tuple[str, str], str] = {}
        self.indices: dict[tuple, str] = {}
        self.inputs: dict[str, KernelArg] = {}
        self.ops: list[str] = []
        self.seeded: set[str] = set()  # nodes whose value is given (an epilogue's), not computed or read
        self.hoist = False  # record HoistedLoads (the pointwise kernels' walker only)
        # Inputs read at lane i itself as scalars (in{k}[i]), not lanes of a vector load: a walk whose
        # caller has no vector loads of them (an epilogue's vector form).
        self.scalar_lanes = False
        self.lanes: dict[str, tuple[str, str, int]] = {}  # index var -> (base expr, lane expr, run)
        self.hoisted: dict[tuple[int, str], HoistedLoad] = {}
        # (an epilogue's plane walk) index "e" lies in plane `p` of `plane` elements: an index whose
        # every term is constant over a plane is written from p, and `invariant` collects the
        # statements' variables whose value is the same at every element of a plane.
        self.plane = 0
        self.invariant: set[str] = set()
        self.ctypes: dict[str, str] = {}  # variable -> its C type

    def value(self, name: str, idx: _Index) -> str:
        """The fp32 value of node `name` at linear index `idx` of its own shape."""
        key = (name, idx.var)
        if key in self.values:
            return self.values[key]
        node = self.nodes[name]
        if node.get("view"):
            self._same_bits(node)
        if node.get("view") and (given := self._given_through(node, idx)) is not None:
            out = given
        elif node.get("view") and (through := self._view_of(node)) is not None:
            root, strides, offset = through
            out = self.value(root["name"], self._strided(idx, strides, offset, root))
        elif node.get("view"):
            out = self._one_view_step(node, idx)
        elif name in self.inside:
            out = self._compute(node, idx)
        elif node["op"] == "constant" and isinstance(node.get("value"), list) and len(node["value"]) == 1:
            out = c_float(node["value"][0])
        else:
            out = self._load(node, idx)
        self.values[key] = out
        return out

    def _same_bits(self, view: Node) -> None:
        """NotFusable where a step of the view chain reinterprets its source's bits as another dtype
        (`x.view(torch.float16)` of a bfloat16 x, `.view(torch.int32)` of floats): the walk's values
        are numbers converted to fp32, never bits, so it would read the root as its own dtype."""
        node = view
        while node.get("view") and (src := ref_name(node["args"].get("self"))) is not None and src in self.nodes:
            have, want = self.nodes[src].get("dtype"), node.get("dtype")
            if have in C_TYPES and want in C_TYPES and have != want:
                raise NotFusable(f"{node['name']} reinterprets {src}'s {have} bits as {want}")
            node = self.nodes[src]

    def _given_through(self, view: Node, idx: _Index) -> str | None:
        """A seeded value (an epilogue's) read through views that keep every element where it is
        (reshapes of contiguous storage): the same value at the same element."""
        node = view
        while node.get("view"):
            if not is_contiguous(node) or node.get("offset", 0):
                return None
            src = ref_name(node["args"].get("self"))
            if src is None:
                return None
            node = self.nodes[src]
        given = self.values.get((node["name"], idx.var)) if node["name"] in self.seeded else None
        numel = math.prod(view.get("shape") or [0])
        if given is None or not is_contiguous(node) or numel != math.prod(node.get("shape") or [0]):
            return None
        return given

    def _compute(self, node: Node, idx: _Index) -> str:
        reason = pointwise_support(node)
        if reason:
            raise NotFusable(reason)
        integers = int_math(node, lambda n: self.nodes[n].get("dtype"))
        op = (INT64_POINTWISE if node.get("dtype") in INTS else POINTWISE)[node["op"]]
        values: dict[str, str] = {}
        for arg in op.operands:
            raw = node["args"].get(arg)
            src = ref_name(raw)
            if src is not None:
                operand = self.nodes[src]
                if operand.get("shape") is None:
                    raise NotFusable(f"{node['name']} reads {src}, which is not a single tensor")
                values[arg] = self.value(src, self._broadcast(idx, operand["shape"]))
                if integers and operand.get("dtype") == "bool":
                    values[arg] = f"(int64_t)({values[arg]})"  # (held as 1.0f or 0.0f)
            elif isinstance(raw, bool | int | float):
                values[arg] = c_int(raw) if integers else c_float(raw)
        expr = op.render(Operands(values, {**node["args"], "_dtype": node.get("dtype")}))
        self.ops.append(node["op"])
        if node.get("dtype") in INTS and node["dtype"] != "int64":
            # (wrapped where PyTorch's narrower integer arithmetic wraps)
            expr = f"(int64_t)({C_TYPES[node['dtype']]})({expr})"
        return self._emit("int64_t" if node.get("dtype") in INTS else "float", "v", expr, node["name"])

    def _load(self, node: Node, idx: _Index) -> str:
        if node.get("shape") is None or node.get("dtype") not in C_TYPES:
            raise NotFusable(f"{node['name']}: a {node.get('dtype')} tensor cannot be read by the pointwise emitter")
        if not is_contiguous(node):
            raise NotFusable(f"{node['name']} is read but its traced layout is not contiguous")
        name = node["name"]
        direct = idx.var == "i" and not self.scalar_lanes
        prev = self.inputs.get(name)
        k = list(self.inputs).index(name) if prev else len(self.inputs)
        self.inputs[name] = KernelArg(name, node["dtype"], direct or bool(prev and prev.direct))
        src = f"in{k}_v.v[l]" if direct else f"in{k}[{idx.var}]"
        if self.hoist and not direct and idx.var in self.lanes and node["dtype"] != "bool":
            base, lane, run = self.lanes[idx.var]
            self.hoisted[(k, idx.var)] = HoistedLoad(k, idx.var, C_TYPES[node["dtype"]], base, lane, run)
            src = f"in{k}_{idx.var}.v[l]"
        if node["dtype"] in INTS:
            return self._emit("int64_t", "v", f"(int64_t)({src})", name)
        return self._emit("float", "v", f"sc_to_f({src})", name)

    def _view_of(self, node: Node) -> tuple[Node, list[int], int] | None:
        """The node a view reads, and the view's strides and offset over it in row-major order; None
        where the root is computed here and the traced strides cannot be carried over to row-major
        (then _one_view_step)."""
        view = node
        while node.get("view"):
            src = ref_name(node["args"].get("self"))
            if src is None:
                raise NotFusable(f"{view['name']}: a view without a tensor source")
            node = self.nodes[src]
        if node["name"] not in self.inside:
            # Read from memory: the traced layout is the real one, and the loads assume row-major.
            if not is_contiguous(node):
                raise NotFusable(f"a view of {node['name']}, whose traced layout is not contiguous")
            return node, view["stride"], view.get("offset", 0)
        # Computed here: the walker evaluates it in row-major order, whatever layout was traced.
        moved = restride(view["shape"], view["stride"], view.get("offset", 0), node["shape"], node["stride"])
        if moved is None:
            return None
        return node, *moved

    def _one_view_step(self, view: Node, idx: _Index) -> str:
        """A view of a value computed here, whose traced strides only its traced layout allows (a
        reshape merging dimensions a transpose separated in memory: `.view` after `.permute` of a
        result laid out transposed). A view's meaning does not depend on the layout: replayed on
        its source's row-major shape it maps each element to the source's element, one view at a
        time down the chain."""
        src = ref_name(view["args"].get("self"))
        node = self.nodes[src] if src is not None else None
        if node is None or node.get("shape") is None:
            raise NotFusable(f"{view['name']}: a view without a tensor source")
        got = replay_view(view, node["name"], node["shape"], contiguous_strides(node["shape"]))
        if got is None:
            raise NotFusable(f"{view['name']}: a view that cannot be read from a row-major {node['name']}")
        return self.value(node["name"], self._strided(idx, got[0], got[1], node))

    def _broadcast(self, idx: _Index, shape: Sequence[int]) -> _Index:
        """Index into an operand of `shape` broadcast (right-aligned) to idx.shape."""
        if tuple(shape) == idx.shape:
            return idx
        pad = len(idx.shape) - len(shape)
        if pad < 0:
            raise NotFusable(f"operand of shape {list(shape)} is larger than the result {list(idx.shape)}")
        own = contiguous_strides(shape)
        strides = [0] * pad + [0 if s == 1 else st for s, st in zip(shape, own, strict=True)]
        return self._strided(idx, strides, 0, {"shape": list(shape)})

    def _strided(self, idx: _Index, strides: Sequence[int], offset: int, target: Node) -> _Index:
        """Index of element idx into a tensor laid out as (idx.shape, strides, offset) over `target`."""
        shape = tuple(target["shape"])
        key = (idx.var, idx.shape, tuple(strides), offset)
        if key not in self.indices:
            # Lane i of a vector is base + l, base a multiple of VEC (<= LANES): where the dimensions a
            # vector can span are all broadcast, every lane reads one element, found and loaded once
            # from base (a bias per channel read per lane was 3 of a softmax's 19 instructions an
            # element on level 2's 38, which issued at 77% of the SMs' peak).
            lanes = idx.var == "i" and lane_invariant_on() and _lane_invariant(idx.shape, strides)
            expr = _index_expr("base" if lanes else idx.var, idx.shape, strides, offset)
            if self.plane and idx.var == "e":
                expr = _plane_index_expr(idx.shape, strides, offset, self.plane) or expr
            self.indices[key] = expr if expr == idx.var or expr.isdigit() else self._emit("int64_t", "j", expr)
            run = _lane_run(idx.shape, strides, offset) if self.hoist and idx.var == "i" else 1
            if run > 1 and self.indices[key] != "i" and not expr.isdigit():
                self.lanes[self.indices[key]] = (_index_expr("base", idx.shape, strides, offset),
                                                 _index_expr("(base + l)", idx.shape, strides, offset), run)
        return _Index(self.indices[key], shape)

    def _emit(self, ctype: str, prefix: str, expr: str, comment: str = "") -> str:
        var = f"{prefix}{len(self.lines)}"
        self.lines.append(f"const {ctype} {var} = {expr};" + (f"  // {comment}" if comment else ""))
        self.ctypes[var] = ctype
        # The same over a plane: reads neither the element (e) nor the kernel's value (v), and every
        # variable it reads is (the walker's own names, made just above).
        if self.plane and not re.search(r"\b[ev]\b", expr) and all(
                ref in self.invariant for ref in re.findall(r"\b[vj]\d+\b", expr)):
            self.invariant.add(var)
        return var


def _plane_index_expr(shape: Sequence[int], strides: Sequence[int], offset: int, plane: int) -> str | None:
    """_index_expr's index of row-major element e of `shape`, written from p = e / plane (the plane
    of `plane` elements it lies in) where no term needs e itself: a batch norm's channel over NCHW
    planes. None where one does, or where p may not fit 32 bits."""
    if numel(shape) // plane >= 2**32:
        return None
    divisors = contiguous_strides(shape)
    terms = []
    for size, stride, div in zip(shape, strides, divisors, strict=True):
        if size == 1 or stride == 0:
            continue
        if div % plane:
            return None
        outermost = div * size == numel(shape)
        coord = ("(int64_t)((uint32_t)p" + (f" / {div // plane}u" if div != plane else "")
                 + ("" if outermost else f" % {size}u") + ")")
        terms.append(coord if stride == 1 else f"{coord} * {stride}")
    if offset:
        terms.insert(0, str(offset))
    return " + ".join(terms) or "0"


def _index_expr(var: str, shape: Sequence[int], strides: Sequence[int], offset: int) -> str:
    """offset + sum(coord_d * stride_d) for the row-major coordinates of `var` in `shape`.

    Adjacent dimensions that stay adjacent in memory are merged first (as TensorIterator does), so
    a bias over channels costs one divide and one modulo whatever the rank."""
    total = numel(shape)
    divisors = contiguous_strides(shape)
    dims: list[list[int]] = []  # [size, stride, divisor], outermost first
    for size, stride, div in zip(shape, strides, divisors, strict=True):
        if size == 1:
            continue
        if dims and dims[-1][1] == stride * size:
            dims[-1] = [dims[-1][0] * size, stride, div]
        else:
            dims.append([size, stride, div])
    # Indices below 2^32 use 32-bit unsigned division, several times cheaper than 64-bit.
    narrow = total <= 2**32
    terms = []
    for size, stride, div in dims:
        if stride == 0:
            continue
        outermost = div * size == total
        if div == 1 and outermost:
            coord = var
        elif narrow:
            coord = f"(uint32_t){var}" + (f" / {div}u" if div != 1 else "") + ("" if outermost else f" % {size}u")
            coord = f"(int64_t)({coord})"
        else:
            coord = f"({var}" + (f" / {div}" if div != 1 else "") + ("" if outermost else f" % {size}") + ")"
        terms.append(coord if stride == 1 else f"{coord} * {stride}")
    if offset:
        terms.insert(0, str(offset))
    if not terms:
        return "0"
    return " + ".join(terms)


def lower(
    graph: Sequence[Node], group: FusionGroup, name: str, *, nodes: dict[str, Node] | None = None
) -> PointwiseKernel:
    """Walk a pointwise group from its outputs to its inputs: the kernel's statements and arguments."""
    nodes = nodes if nodes is not None else by_name(graph)
    if not group.outputs:
        raise NotFusable("the group has no outputs")
    shape = tuple(nodes[group.outputs[0]]["shape"])
    w = _Lowering(graph, group, nodes)
    w.hoist = lane_loads_enabled()
    stores: list[tuple[KernelArg, str]] = []
    for out in group.outputs:
        node = nodes[out]
        if tuple(node.get("shape") or ()) != shape:
            raise NotFusable(f"outputs {group.outputs[0]} and {out} differ in shape")
        if node.get("dtype") not in C_TYPES:
            raise NotFusable(f"{out}: dtype {node.get('dtype')} is not supported by the pointwise emitter yet")
        stores.append((KernelArg(out, node["dtype"], True), w.value(out, _Index("i", shape))))
    body = list(w.lines)
    # A hoisted load's per-lane index may have no other reader left.
    body += [f"(void){v};" for v in dict.fromkeys(h.var for h in w.hoisted.values())]
    for k, (arg, var) in enumerate(stores):
        store = f"({C_TYPES[arg.dtype]})({var})" if arg.dtype in INTS else f"sc_from_f<{C_TYPES[arg.dtype]}>({var})"
        body.append(f"out{k}_v.v[l] = {store};")
    return PointwiseKernel(name, list(shape), list(w.inputs.values()), [a for a, _ in stores], body, w.ops,
                           list(w.hoisted.values()))


@dataclass(frozen=True)
class Prologue:
    """A pointwise node computed where a kernel reads it instead of being stored first: C statements
    giving its fp32 value at row-major element `e` of its shape, from `inputs` (read as in0, in1,
    ...). A kernel that takes one defines them as members of a loader struct."""

    node: str
    shape: tuple[int, ...]
    dtype: str
    inputs: list[KernelArg]
    lines: list[str]
    value: str
    ops: list[str]
    # The same chain over VEC consecutive elements from `base`: statements for element `i` (lane l)
    # in which the inputs read at the element itself are lanes of one vector load each (`direct`,
    # per input); empty where the two walks disagree on the inputs (then `vec` reads element by
    # element, and a kernel reading vectors should not take it).
    vec_lines: tuple[str, ...] = ()
    vec_value: str = ""
    direct: tuple[bool, ...] = ()
    # The chain as a function of its one input read at the element itself (fp32; `staged.value`),
    # per plane (Epilogue's plane form): a kernel that copies that input into shared memory as it is
    # stored (cp.async) computes the chain there afterwards. None where the chain reads more than one
    # tensor at the element, reads it elsewhere too, or is not fp32.
    staged: Epilogue | None = None
    # The C type `value` has: float, or sc_red_f2 (reduce.cuh) for two nodes read together
    # (prologue_pair), whose components are rounded to their dtypes already.
    value_type: str = "float"

    @property
    def vectorised(self) -> bool:
        return bool(self.vec_value)

    def params(self, suffix: str = "_") -> list[str]:
        """The launcher's parameters for the inputs: `const void* in0_, ...`."""
        return [f"const void* in{k}{suffix}" for k in range(len(self.inputs))]

    def construct(self, struct: str, suffix: str = "_", first: int = 0) -> str:
        """A `struct` loader made from those parameters (numbered from `first`, where the launcher
        has others before them)."""
        fields = ", ".join(f"static_cast<const {C_TYPES[a.dtype]}*>(in{first + k}{suffix})"
                           for k, a in enumerate(self.inputs))
        return f"{struct}{{{fields}}}"

    def loader(self, struct: str) -> str:
        """`struct`: a functor whose call with e returns the value, rounded to the node's dtype as
        storing it would round it."""
        members = "\n".join(f"  const {C_TYPES[a.dtype]}* __restrict__ in{k};" for k, a in enumerate(self.inputs))
        body = "\n".join(f"    {line}" for line in self.lines)
        value = self.value if self.dtype == "float32" else f"sc_to_f(sc_from_f<{C_TYPES[self.dtype]}>({self.value}))"
        return f"""struct {struct} {{
{members}
  SC_INLINE {self.value_type} operator()(int64_t e) const {{
{body}
    return {value};
  }}
{self._vector_members()}}};
"""

    def _vector_members(self) -> str:
        """`vec<VEC>(base)`: the values of elements base .. base + VEC - 1 (base a multiple of VEC),
        each input read at the element itself loaded as one vector; `aligned(n)`: whether those
        inputs' pointers allow n-element vectors (asked on the host)."""
        t = self.value_type
        if not self.vectorised:
            return f"""  template <int VEC> SC_INLINE sc_vec<{t}, VEC> vec(int64_t base) const {{
    sc_vec<{t}, VEC> out_;
#pragma unroll
    for (int l = 0; l < VEC; ++l) out_.v[l] = (*this)(base + l);
    return out_;
  }}
  bool aligned(int) const {{ return true; }}
"""
        loads = "\n".join(f"    const sc_vec<{C_TYPES[a.dtype]}, VEC> in{k}_v = sc_load<VEC>(in{k} + base);"
                          for k, a in enumerate(self.inputs) if self.direct[k])
        body = "\n".join(f"      {line}" for line in self.vec_lines)
        value = (self.vec_value if self.dtype == "float32"
                 else f"sc_to_f(sc_from_f<{C_TYPES[self.dtype]}>({self.vec_value}))")
        checks = " && ".join(f"sc_aligned(in{k}, n)" for k in range(len(self.inputs)) if self.direct[k]) or "true"
        return f"""  template <int VEC> SC_INLINE sc_vec<{t}, VEC> vec(int64_t base) const {{
{loads}
    sc_vec<{t}, VEC> out_;
#pragma unroll
    for (int l = 0; l < VEC; ++l) {{
      const int64_t i = base + l;
      (void)i;
{body}
      out_.v[l] = {value};
    }}
    return out_;
  }}
  bool aligned(int n) const {{ return {checks}; }}
"""


def prologue(graph: Sequence[Node], members: Sequence[str], name: str, *, nodes: dict[str, Node] | None = None) -> Prologue:
    """Node `name` (pointwise, its pointwise ancestors `members`) as a Prologue, or NotFusable."""
    nodes = nodes if nodes is not None else by_name(graph)
    node = nodes[name]
    if node.get("dtype") not in ("float32", "float16", "bfloat16"):
        raise NotFusable(f"{name}: a {node.get('dtype')} prologue")
    shape = tuple(node["shape"])
    # Not `i`: the walker reads index `i` as the kernel's own vector lane.
    w = _Lowering(graph, FusionGroup(kind="pointwise", nodes=list(members), inputs=[], outputs=[name]), nodes)
    value = w.value(name, _Index("e", shape))
    if any(a.dtype not in C_TYPES or a.dtype in INTS for a in w.inputs.values()):
        raise NotFusable(f"{name}: reads an integer tensor")
    # Again at the kernel's own lane index `i`: the inputs read at the element itself become vector
    # loads (as in a pointwise kernel's chunk), for a kernel that reads the node VEC elements a thread.
    v = _Lowering(graph, FusionGroup(kind="pointwise", nodes=list(members), inputs=[], outputs=[name]), nodes)
    vec_value = v.value(name, _Index("i", shape))
    vec = _vector_form(w, v, vec_value)
    direct = [a for a in v.inputs.values() if a.direct]
    if vec and node["dtype"] == "float32" and len(direct) == 1 and direct[0].dtype == "float32":
        try:
            staged = epilogue(graph, members, name, direct[0].name, nodes=nodes)
        except NotFusable:
            staged = None
        if staged is not None and staged.plane_lines:
            vec["staged"] = staged
    return Prologue(name, shape, node["dtype"], list(w.inputs.values()), list(w.lines), value, list(w.ops), **vec)


def _vector_form(w: _Lowering, v: _Lowering, vec_value: str) -> dict[str, Any]:
    """Prologue's vector fields from the walk at the lane index (`v`), where it reads the inputs of
    the walk at `e` (`w`) and at least one of them at the element itself; none otherwise."""
    if list(v.inputs) != list(w.inputs) or not any(a.direct for a in v.inputs.values()):
        return {}
    return {"vec_lines": tuple(v.lines), "vec_value": vec_value, "direct": tuple(a.direct for a in v.inputs.values())}


def prologue_pair(
    graph: Sequence[Node], first: tuple[Sequence[str], str], second: tuple[Sequence[str], str], *,
    nodes: dict[str, Node] | None = None,
) -> Prologue:
    """Two pointwise nodes of one shape, each (members, name), as one loader whose value is both of
    them at element e (a `sc_red_f2`): one walk, so an input both read is loaded once (a triplet
    loss's anchor, read by its two distances). NotFusable as `prologue` says, or where the shapes
    differ."""
    nodes = nodes if nodes is not None else by_name(graph)
    (members_a, a), (members_b, b) = first, second
    for name in (a, b):
        if nodes[name].get("dtype") not in ("float32", "float16", "bfloat16"):
            raise NotFusable(f"{name}: a {nodes[name].get('dtype')} prologue")
    shape = tuple(nodes[a]["shape"])
    if tuple(nodes[b]["shape"]) != shape:
        raise NotFusable(f"{a} and {b} differ in shape")
    group = FusionGroup(kind="pointwise", nodes=list(dict.fromkeys([*members_a, *members_b])), inputs=[], outputs=[a, b])

    def both(var: str) -> tuple[_Lowering, str]:
        w = _Lowering(graph, group, nodes)
        parts = []
        for name in (a, b):
            v = w.value(name, _Index(var, shape))
            dtype = nodes[name]["dtype"]
            parts.append(v if dtype == "float32" else f"sc_to_f(sc_from_f<{C_TYPES[dtype]}>({v}))")
        return w, f"sc_red_f2{{{parts[0]}, {parts[1]}}}"

    # `e` and the lane index `i` as in `prologue`.
    w, value = both("e")
    if any(x.dtype not in C_TYPES or x.dtype in INTS for x in w.inputs.values()):
        raise NotFusable(f"{a}, {b}: read an integer tensor")
    v, vec_value = both("i")
    return Prologue(f"{a}+{b}", shape, "float32", list(w.inputs.values()), list(w.lines), value, list(w.ops),
                    value_type="sc_red_f2", **_vector_form(w, v, vec_value))


@dataclass(frozen=True)
class Epilogue:
    """A pointwise chain a kernel computes from one of its own results as it stores it, in place of
    storing that result for a pointwise kernel to read back: C statements giving the chain's end
    (`node`) at row-major element `e` from the result's fp32 value `v` there (rounded first to the
    result's dtype, as storing it would) and from `inputs` (read as in0, in1, ...)."""

    node: str
    value: str  # the kernel's result the chain reads, never stored
    shape: tuple[int, ...]
    dtype: str  # the chain end's: what the kernel stores
    value_dtype: str
    inputs: list[KernelArg]
    lines: list[str]
    result: str
    ops: list[str]
    # The chain's nodes in order (its end last): what a library that fuses the chain itself reads.
    members: list[str] = field(default_factory=list)
    # The same chain walked per plane of `plane` elements (the product of the dimensions after the
    # second: an NCHW convolution's output planes), for a kernel that stores a plane's elements
    # together: `plane_hoisted` (C type, variable) are the statements the same over a plane (a batch
    # norm's channel, its parameters, rsqrt(var + eps)), worked out once a plane by at_plane(p);
    # the rest, `plane_lines`, per element. Empty where the shape has no planes.
    plane: int = 0
    plane_lines: tuple[tuple[str, str], ...] = ()  # (the variable it declares, the statement)
    plane_hoisted: tuple[tuple[str, str], ...] = ()
    plane_result: str = ""
    # The chain over VEC consecutive elements from `base` (a multiple of VEC), lane l at i = base + l:
    # what lanes share (a channel's parameters, lane_invariant) is worked out once a vector. Empty
    # where the walks disagree on the inputs (then `vec` calls the element form lane by lane).
    vec_lines: tuple[str, ...] = ()
    vec_result: str = ""

    def construct(self, struct: str, first: int) -> str:
        """A `struct` made from the launcher's parameters in{first}, in{first + 1}, ..."""
        fields = ", ".join(f"static_cast<const {C_TYPES[a.dtype]}*>(in{first + k})" for k, a in enumerate(self.inputs))
        return f"{struct}{{{fields}}}"

    def functor(self, struct: str, planes: bool = False) -> str:
        """`struct`: its call with (e, v) returns the chain's end at e, in fp32. With `planes` (where
        the chain has them) also the per-plane form: `at_plane(p)` gives a plane_t of what is the same
        over plane p, and a call with (that plane_t, e, v) the chain's end at e of that plane."""
        members = "\n".join(f"  const {C_TYPES[a.dtype]}* __restrict__ in{k};" for k, a in enumerate(self.inputs))
        body = "\n".join(f"    {line}" for line in self.lines)
        rounded = "v_" if self.value_dtype == "float32" else f"sc_to_f(sc_from_f<{C_TYPES[self.value_dtype]}>(v_))"
        return f"""struct {struct} {{
{members or "  char unused_;"}
  SC_INLINE float operator()(int64_t e, float v_) const {{
    const float v = {rounded};
    (void)e;
{body}
    return {self.result};
  }}
{self._vector_member(rounded)}{self._plane_members(rounded) if planes else ""}}};
"""

    def _vector_member(self, rounded: str) -> str:
        """`vec<VEC>(base, x)`: the chain's end at elements base .. base + VEC - 1 from the kernel's
        values x there (base a multiple of VEC)."""
        if not self.vec_result:
            each = "out_.v[l] = (*this)(base + l, x_.v[l]);"
        else:
            body = "\n".join(f"      {line}" for line in self.vec_lines)
            each = f"""const int64_t i = base + l;
      (void)i;
      const float v_ = x_.v[l];
      const float v = {rounded};
{body}
      out_.v[l] = {self.vec_result};"""
        return f"""  template <int VEC> SC_INLINE sc_vec<float, VEC> vec(int64_t base, const sc_vec<float, VEC>& x_) const {{
    sc_vec<float, VEC> out_;
#pragma unroll
    for (int l = 0; l < VEC; ++l) {{
      {each}
    }}
    return out_;
  }}
"""

    def _plane_members(self, rounded: str) -> str:
        if not self.plane:
            raise ValueError(f"{self.node}: a chain over {list(self.shape)} has no planes")
        hoisted = {var for _, var in self.plane_hoisted}
        fields = "".join(f" {ctype} {var};" for ctype, var in self.plane_hoisted)
        once = "\n".join(f"    {line}" for var, line in self.plane_lines if var in hoisted)
        each = "\n".join(f"    {line}" for var, line in self.plane_lines if var not in hoisted)
        # (Only those an element's statements read: nvcc warns of a variable never read.)
        # (Not in the statements' comments, which name graph nodes.)
        code = " ".join(line.split("//", 1)[0] for var, line in self.plane_lines if var not in hoisted)
        read = set(re.findall(r"\b[vj]\d+\b", code + " " + self.plane_result))
        given = "\n".join(f"    const {ctype} {var} = h_.{var};" for ctype, var in self.plane_hoisted if var in read)
        names = ", ".join(var for _, var in self.plane_hoisted)
        return f"""  struct plane_t {{{fields} }};
  SC_INLINE plane_t at_plane(uint32_t p) const {{
    (void)p;
{once}
    return plane_t{{{names}}};
  }}
  SC_INLINE float operator()(const plane_t& h_, int64_t e, float v_) const {{
    const float v = {rounded};
    (void)e;
    (void)h_;
{given}
{each}
    return {self.plane_result};
  }}
"""


def epilogue(graph: Sequence[Node], members: Sequence[str], name: str, value: str, *,
             nodes: dict[str, Node] | None = None) -> Epilogue:
    """Node `name` (pointwise, its pointwise ancestors `members`) computed from `value` (a kernel's
    result of the same shape, read only element for element) as an Epilogue, or NotFusable."""
    nodes = nodes if nodes is not None else by_name(graph)
    node, src = nodes[name], nodes[value]
    floats = ("float32", "float16", "bfloat16")
    if node.get("dtype") not in floats or src.get("dtype") not in floats:
        raise NotFusable(f"{name}: an epilogue from {src.get('dtype')} to {node.get('dtype')}")
    shape = tuple(node["shape"])
    # The same elements in the same order (an instance norm's [1, N*C, ...] read as [N, C, ...]).
    if math.prod(src.get("shape") or [0]) != math.prod(shape) or not is_contiguous(src) or not is_contiguous(node):
        raise NotFusable(f"{name} and {value} differ in size or layout")
    w = _Lowering(graph, FusionGroup(kind="pointwise", nodes=list(members), inputs=[], outputs=[name]), nodes)
    w.values[(value, "e")] = "v"  # the kernel's own value at the element it stores
    w.seeded.add(value)
    result = w.value(name, _Index("e", shape))
    if value in w.inputs:
        raise NotFusable(f"{name} reads {value} at other elements than its own")
    if any(a.dtype not in C_TYPES or a.dtype in INTS for a in w.inputs.values()):
        raise NotFusable(f"{name}: reads an integer tensor")
    forms: dict[str, Any] = {}  # the vector and plane forms, where the walks agree on the inputs
    # The walk again at vector lanes (i = base + l), every input read as a scalar there.
    vw = _Lowering(graph, FusionGroup(kind="pointwise", nodes=list(members), inputs=[], outputs=[name]), nodes)
    vw.scalar_lanes = True
    vw.values[(value, "i")] = "v"
    vw.seeded.add(value)
    vec_result = vw.value(name, _Index("i", shape))
    if list(vw.inputs) == list(w.inputs) and value not in vw.inputs:
        forms = {"vec_lines": tuple(vw.lines), "vec_result": vec_result}
    plane = math.prod(shape[2:]) if len(shape) > 2 else 0
    if plane:
        # The walk again, indices constant over a plane written from the plane's number.
        pw = _Lowering(graph, FusionGroup(kind="pointwise", nodes=list(members), inputs=[], outputs=[name]), nodes)
        pw.plane = plane
        pw.values[(value, "e")] = "v"
        pw.seeded.add(value)
        plane_result = pw.value(name, _Index("e", shape))
        # (Same inputs in the same order: the struct's members are the plain walk's.)
        if list(pw.inputs) == list(w.inputs):
            hoisted = tuple((pw.ctypes[var], var) for var in pw.ctypes if var in pw.invariant)
            # (Every statement is _emit's: its variables are in the statements' order.)
            forms |= {"plane": plane, "plane_lines": tuple(zip(pw.ctypes, pw.lines, strict=True)), "plane_hoisted": hoisted,
                      "plane_result": plane_result}
    return Epilogue(name, value, shape, node["dtype"], src["dtype"], list(w.inputs.values()), list(w.lines), result,
                    list(w.ops), list(members), **forms)


# ---------------------------------------------------------------------------------------------
# The emitter


def render(kernels: Sequence[PointwiseKernel], *, host_entry: bool = False, after: Sequence[str] = ()) -> str:
    """One .cu source with every kernel; with host_entry, also `<name>_host` CPU entry points.
    `after`: the other kernels' sources the file goes on with (their prologues and epilogues are
    this module's walker's too)."""
    # Includes, conversions, element functions and sc_grid, once per .cu.
    prelude = cuda_text.fill("prelude.cuh", THREADS=THREADS, BLOCKS_PER_SM=BLOCKS_PER_SM)
    bodies = [render_kernel(k, host_entry=host_entry) for k in kernels]
    if pw_shape() == "triton":
        # Those kernels size their grids exactly: sc_grid may have no caller left, and nvcc warns of
        # an unreferenced static function.
        prelude += "[[maybe_unused]] static unsigned (*const sc_pw_grid)(int64_t) = &sc_grid;\n"
    # Only where a kernel calls them: a file without exp keeps its bytes (recorded GPU runs are
    # matched by them).
    if any(call in text for text in (*bodies, *after) for call in FAST_EXP_CALLS):
        prelude += "\n" + cuda_text.load("fast_math.cuh")
    if any("sc_sigmoid_fdiv(" in text for text in bodies):
        prelude += cuda_text.load("fast_div.cuh")
    if any("_i64(" in text for text in (*bodies, *after)):
        prelude += "\n" + cuda_text.load("int_math.cuh")
    if any(call in text for text in (*bodies, *after) for call in ("sc_digamma(", "sc_erfinv(")):
        prelude += "\n" + cuda_text.load("special.cuh")
    return "\n".join([prelude, *bodies])


@dataclass(frozen=True)
class _Signature:
    """What every shape of a pointwise kernel declares: its pointers as the chunk functions take them
    (`params`) and pass them on (`names`), as the launcher gets them (`raw`, cast back by `casts`),
    and `aligned`, the launcher's test that every pointer read or written as a vector allows one."""

    ins: list[tuple[str, str, KernelArg]]  # (in0, C type, argument)
    outs: list[tuple[str, str, KernelArg]]
    params: list[str]
    names: str
    raw: list[str]
    casts: list[str]
    aligned: str


def _signature(k: PointwiseKernel) -> _Signature:
    ins = [(f"in{i}", C_TYPES[a.dtype], a) for i, a in enumerate(k.inputs)]
    outs = [(f"out{i}", C_TYPES[a.dtype], a) for i, a in enumerate(k.outputs)]
    params = [f"const {t}* __restrict__ {n}" for n, t, _ in ins]
    params += [f"{t}* __restrict__ {n}" for n, t, _ in outs]
    names = ", ".join(n for n, _, _ in ins + outs)
    raw = [f"const void* {n}_" for n, _, _ in ins] + [f"void* {n}_" for n, _, _ in outs]
    casts = [f"  const auto {n} = static_cast<const {t}*>({n}_);" for n, t, _ in ins]
    casts += [f"  const auto {n} = static_cast<{t}*>({n}_);" for n, t, _ in outs]
    vectorised = [n for n, _, a in ins + outs if a.direct]
    # A hoisted input whose run covers the vector is loaded as one vector: its pointer must be aligned too.
    vectorised += list(dict.fromkeys(f"in{h.k}" for h in k.hoisted if h.run % k.vec == 0))
    aligned = " && ".join(f"sc_aligned({n}, {k.vec})" for n in vectorised)
    return _Signature(ins, outs, params, names, raw, casts, aligned)


def _hoisted_fill(h: HoistedLoad, dest: str) -> list[str]:
    """Statements filling `dest` (an sc_vec) with hoisted input h's VEC values at chunk `base`."""
    # One vector a chunk where the index runs with the chunk's lanes (a VEC-aligned base inside a
    # run of `run`); element by element otherwise (VEC longer than the run, the scalar tail).
    return [
        f"  if constexpr ({h.run} % VEC == 0) {dest} = sc_load<VEC>(in{h.k} + ({h.base_expr}));",
        "  else",
        "#pragma unroll",
        f"    for (int l = 0; l < VEC; ++l) {dest}.v[l] = in{h.k}[{h.lane_expr}];",
    ]


def render_kernel(k: PointwiseKernel, *, host_entry: bool = False) -> str:
    sig = _signature(k)
    if pw_shape() == "triton" and _triton_fits(k):
        return _render_triton(k, sig, host_entry=host_entry)
    ins, outs, params, names, raw, casts = sig.ins, sig.outs, sig.params, sig.names, sig.raw, sig.casts
    aligned = sig.aligned
    chunk = [f"template <int VEC>\nSC_INLINE void {k.name}_chunk(int64_t base, {', '.join(params)}) {{"]
    chunk += [f"  const sc_vec<{t}, VEC> {n}_v = sc_load<VEC>({n} + base);" for n, t, a in ins if a.direct]
    for h in k.hoisted:
        chunk += [f"  sc_vec<{h.ctype}, VEC> in{h.k}_{h.var};", *_hoisted_fill(h, f"in{h.k}_{h.var}")]
    chunk += [f"  sc_vec<{t}, VEC> {n}_v;" for n, t, _ in outs]
    chunk += ["#pragma unroll", "  for (int l = 0; l < VEC; ++l) {", "    const int64_t i = base + l;", "    (void)i;"]
    chunk += [f"    {line}" for line in k.body]
    chunk += ["  }"]
    chunk += [f"  sc_store<VEC>({n} + base, {n}_v);" for n, _, _ in outs]
    chunk += ["}"]
    ops = " -> ".join(k.ops) or "copy"
    n, vec = f"{k.name}_n", k.vec
    scalar = f"{k.name}_kernel<1><<<sc_grid({n}), {THREADS}, 0, stream>>>({names});"
    if vec > 1:
        # Vectorised main loop only where every pointer read or written at `i` is 16-byte aligned.
        launch = (
            f"  if ({aligned})\n    {k.name}_kernel<{vec}><<<sc_grid({n} / {vec}), {THREADS}, 0, stream>>>({names});\n"
            f"  else\n    {scalar}"
        )
        host_loop = (
            f"  if ({aligned})\n    for (; done + {vec} <= {n}; done += {vec}) {k.name}_chunk<{vec}>(done, {names});\n"
        )
    else:
        launch, host_loop = f"  {scalar}", ""
    text = f"""
// {k.name}: {ops} over {k.shape} ({k.numel} elements)
static constexpr int64_t {n} = {k.numel}LL;

{chr(10).join(chunk)}

template <int VEC>
__global__ void __launch_bounds__({THREADS}) {k.name}_kernel({", ".join(params)}) {{
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (int64_t c = t; c < {n} / VEC; c += step) {k.name}_chunk<VEC>(c * VEC, {names});
  for (int64_t i = {n} / VEC * VEC + t; i < {n}; i += step) {k.name}_chunk<1>(i, {names});
}}

extern "C" int {k.name}({", ".join(raw + ["cudaStream_t stream"])}) {{
{chr(10).join(casts)}
  if ({n} == 0) return 0;
{launch}
  return (int)cudaGetLastError();
}}
"""
    if host_entry:
        text += f"""
// The same chunks on the CPU, in order: lets tests check the generated arithmetic without a GPU.
extern "C" int {k.name}_host({", ".join(raw + ["void*"])}) {{
{chr(10).join(casts)}
  int64_t done = 0;
{host_loop}  for (; done < {n}; ++done) {k.name}_chunk<1>(done, {names});
  return 0;
}}
"""
    return text


# ---------------------------------------------------------------------------------------------
# The Triton-like shape (STITCHCUDA_PW_SHAPE=triton; pw_shape says what it is)


def _triton_blocks(numel: int, vec: int) -> int:
    """Blocks of the exact grid: every whole VEC-element chunk once, triton_vectors() of them a thread."""
    return max(1, -(-(numel // vec) // (TRITON_THREADS * triton_vectors())))


# Vectors a thread of the Triton-like shape may hold loaded at once (triton_vectors() per operand read
# as a vector), four registers each: past it, a chain reading many tensors keeps the grid-stride
# shape. A 24-input chain took 168 registers in this shape (120 grid-stride), no spills; a few more
# inputs and ptxas would spill the loads the shape issues early.
TRITON_MAX_VECTORS = 40


def _triton_fits(k: PointwiseKernel) -> bool:
    # A kernel of fewer elements than one vector (a 0-dim result) keeps the grid-stride shape: its
    # vector instantiation would have no whole chunk, and nothing to gain. The grid must fit in
    # gridDim.x even element by element (the misaligned fallback).
    loaded = triton_vectors() * (sum(a.direct for a in k.inputs) + len(k.hoisted))
    return k.numel >= k.vec and _triton_blocks(k.numel, 1) < 2**31 and loaded <= TRITON_MAX_VECTORS


def _triton_index(k: PointwiseKernel) -> str:
    """The chunk index's C type: 32-bit where every chunk index a thread forms fits (a 64-bit multiply
    and add per address otherwise), as Triton narrows its offsets to int32 below 2^31 elements."""
    return "uint32_t" if k.numel + TRITON_THREADS * triton_vectors() < 2**32 else "int64_t"


def _triton_loads(k: PointwiseKernel, sig: _Signature) -> str:
    """`NAME_in<VEC>`: a chunk's vectors (inputs read at the element, hoisted broadcasts) and
    `NAME_load<VEC>(base)` filling it, apart from the arithmetic so that a thread can issue every
    load of its chunks before the first one's math (Triton's order: the loads' latencies overlap)."""
    fields = [(f"{n}_v", t) for n, t, a in sig.ins if a.direct]
    fields += [(f"in{h.k}_{h.var}", h.ctype) for h in k.hoisted]
    members = "\n".join(f"  sc_vec<{t}, VEC> {f};" for f, t in fields)
    fills = [f"  r.{n}_v = sc_load<VEC>({n} + base);" for n, _, a in sig.ins if a.direct]
    for h in k.hoisted:
        fills += _hoisted_fill(h, f"r.in{h.k}_{h.var}")
    return f"""template <int VEC>
struct {k.name}_in {{
{members}
}};

template <int VEC>
SC_INLINE {k.name}_in<VEC> {k.name}_load(int64_t base, {", ".join(sig.params)}) {{
  {k.name}_in<VEC> r;
{chr(10).join(fills)}
  return r;
}}"""


def _triton_body(k: PointwiseKernel) -> list[str]:
    """The walker's statements, the sigmoid's division made __fdividef (fast_div.cuh): with 8
    elements a thread, the IEEE division's slow-path branches cost the example's kernel 6 us on the
    H200 (scripts/bench_pointwise.py). Where exp is accurate (STITCHCUDA_FAST_EXP=0) it stays IEEE."""
    return [line.replace("sc_sigmoid_fast(", "sc_sigmoid_fdiv(") for line in k.body]


def _triton_math(k: PointwiseKernel, sig: _Signature) -> str:
    """`NAME_math<VEC>(base, loaded)`: the walker's statements over a loaded chunk, and its stores."""
    # References under the chunk function's names: the walker's statements read them unchanged.
    aliases = [f"  const auto& {n}_v = r.{n}_v;" for n, _, a in sig.ins if a.direct]
    aliases += [f"  const auto& in{h.k}_{h.var} = r.in{h.k}_{h.var};" for h in k.hoisted]
    lines = [*aliases, *(f"  sc_vec<{t}, VEC> {n}_v;" for n, t, _ in sig.outs)]
    lines += ["#pragma unroll", "  for (int l = 0; l < VEC; ++l) {", "    const int64_t i = base + l;"]
    lines += ["    (void)i;", *(f"    {line}" for line in _triton_body(k)), "  }"]
    lines += [f"  sc_store<VEC>({n} + base, {n}_v);" for n, _, _ in sig.outs]
    return f"""template <int VEC>
SC_INLINE void {k.name}_math(int64_t base, const {k.name}_in<VEC>& r, {", ".join(sig.params)}) {{
{chr(10).join(lines)}
}}"""


def _triton_thread(k: PointwiseKernel, sig: _Signature) -> str:
    """`NAME_thread<VEC>(block, t)`: what thread t of a block does, on the GPU and in the host entry."""
    vectors = triton_vectors()
    idx, n, per_block = _triton_index(k), f"{k.name}_n", TRITON_THREADS * vectors
    # The outer test lets nvcc drop the first chunk's own (the same) and keep one path through the
    # loads: without it the example's kernel took 47 registers, not 40, and ran 2 us slower (H200).
    return f"""// Thread t of `block`: chunks first, first + {TRITON_THREADS}, ... ({vectors} of them; a block covers {per_block}
// consecutive chunks), every load before any math; then, in block 0, the n % VEC elements past
// the last whole chunk, one a thread.
template <int VEC>
SC_INLINE void {k.name}_thread({idx} block, int t, {", ".join(sig.params)}) {{
  constexpr int64_t chunks = {n} / VEC;
  const {idx} first = block * ({idx}){per_block} + ({idx})t;
  if (first < chunks) {{
    {k.name}_in<VEC> r[{vectors}];
#pragma unroll
    for (int u = 0; u < {vectors}; ++u) {{
      const {idx} c = first + ({idx})(u * {TRITON_THREADS});
      if (c < chunks) r[u] = {k.name}_load<VEC>((int64_t)c * VEC, {sig.names});
    }}
#pragma unroll
    for (int u = 0; u < {vectors}; ++u) {{
      const {idx} c = first + ({idx})(u * {TRITON_THREADS});
      if (c < chunks) {k.name}_math<VEC>((int64_t)c * VEC, r[u], {sig.names});
    }}
  }}
  if constexpr ({n} % VEC != 0) {{
    if (block == 0 && t < (int)({n} % VEC)) {{
      const int64_t e = chunks * VEC + t;
      {k.name}_math<1>(e, {k.name}_load<1>(e, {sig.names}), {sig.names});
    }}
  }}
}}"""


def _triton_launches(k: PointwiseKernel, sig: _Signature) -> tuple[str, str]:
    """The launcher's and the host entry's statements: the vector instantiation where every vector
    pointer is aligned, element by element otherwise; the host entry runs every thread of the grid."""
    idx = _triton_index(k)

    def launch(vec: int) -> str:
        return f"{k.name}_kernel<{vec}><<<{_triton_blocks(k.numel, vec)}, {TRITON_THREADS}, 0, stream>>>({sig.names});"

    def host(vec: int) -> str:
        blocks = f"for ({idx} b = 0; b < ({idx}){_triton_blocks(k.numel, vec)}; ++b)"
        return f"{blocks}\n      for (int t = 0; t < {TRITON_THREADS}; ++t) {k.name}_thread<{vec}>(b, t, {sig.names});"

    if k.vec == 1:
        return f"  {launch(1)}", f"  {host(1)}"
    launches = f"  if ({sig.aligned})\n    {launch(k.vec)}\n  else\n    {launch(1)}"
    return launches, f"  if ({sig.aligned}) {{\n    {host(k.vec)}\n    return 0;\n  }}\n  {host(1)}"


def _triton_bounds() -> str:
    minb = triton_min_blocks()
    return f"{TRITON_THREADS}, {minb}" if minb else f"{TRITON_THREADS}"


def _render_triton(k: PointwiseKernel, sig: _Signature, *, host_entry: bool) -> str:
    n, ops = f"{k.name}_n", " -> ".join(k.ops) or "copy"
    params = ", ".join(sig.params)
    launch, host = _triton_launches(k, sig)
    text = f"""
// {k.name}: {ops} over {k.shape} ({k.numel} elements), {TRITON_THREADS}-thread blocks of {triton_vectors()} vectors a thread
static constexpr int64_t {n} = {k.numel}LL;

{_triton_loads(k, sig)}

{_triton_math(k, sig)}

{_triton_thread(k, sig)}

template <int VEC>
__global__ void __launch_bounds__({_triton_bounds()}) {k.name}_kernel({params}) {{
  {k.name}_thread<VEC>(blockIdx.x, (int)threadIdx.x, {sig.names});
}}

extern "C" int {k.name}({", ".join(sig.raw + ["cudaStream_t stream"])}) {{
{chr(10).join(sig.casts)}
{launch}
  return (int)cudaGetLastError();
}}
"""
    if host_entry:
        text += f"""
// Every thread of the launch's grid in turn, through the kernel's own per-thread function: lets tests
// check the arithmetic, the chunk indexing and the tail without a GPU.
extern "C" int {k.name}_host({", ".join(sig.raw + ["void*"])}) {{
{chr(10).join(sig.casts)}
{host}
  return 0;
}}
"""
    return text
