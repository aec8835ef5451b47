"""A convolution's pointwise epilogue as cuDNN graph-API pointwise operations, so that cuDNN's runtime
fusion engines compute it as the convolution stores its result (conv.cuh's fused plan).

On the H200 (scripts/probe_cudnn_fusion.cu, cuDNN 9.14, 2026-11-27) level2/1's fp32 NHWC convolution
with bias + relu + bias fused ran in 0.896 ms against 0.869 ms for the convolution alone and 0.694 ms
more for the separate epilogue pass: the epilogue's read and write of the whole result go.

One table maps each aten op to cuDNN pointwise steps, and one walker translates a planner epilogue
(its member nodes, in order) into them. Operands are the convolution's result, an earlier step, a
per-channel tensor (a [C] view of one of the epilogue's inputs: channels-last storage makes it the
last dimension) or a number. Anything else raises NotSupported, and the convolution keeps its
separate epilogue pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stitchcuda.agents.coder.codegen import KernelArg
from stitchcuda.agents.coder.kernels import NotSupported
from stitchcuda.agents.graph import Node, is_contiguous, ref_name

# Operand kinds and step attributes, as conv.cuh's sc_conv_epi_src / sc_conv_epi_step read them.
CONV, STEP, CHANNEL, SCALAR = "SC_EPI_CONV", "SC_EPI_STEP", "SC_EPI_CHANNEL", "SC_EPI_SCALAR"
ATTRS = {"relu_slope": "SC_EPI_RELU_SLOPE", "elu_alpha": "SC_EPI_ELU_ALPHA", "softplus_beta": "SC_EPI_SOFTPLUS_BETA",
         "swish_beta": "SC_EPI_SWISH_BETA"}


@dataclass(frozen=True)
class Source:
    kind: str  # CONV, STEP, CHANNEL or SCALAR
    index: int = 0  # STEP: the step's index; CHANNEL: the epilogue input's
    value: float = 0.0  # SCALAR

    def c(self) -> str:
        return f"{{{self.kind}, {self.index}, {_c_float(self.value)}}}"


@dataclass(frozen=True)
class Step:
    mode: str  # a cudnnPointwiseMode_t name
    a: Source
    b: Source | None = None
    attr: tuple[str, float] | None = None  # (ATTRS key, value)

    def c(self) -> str:
        b = self.b.c() if self.b else "{SC_EPI_NONE, 0, 0.0f}"
        attr = (ATTRS[self.attr[0]], repr(float(self.attr[1]))) if self.attr else ("SC_EPI_ATTR_NONE", "0.0")
        return f"{{CUDNN_POINTWISE_{self.mode}, {self.a.c()}, {b}, {attr[0]}, {attr[1]}}}"


@dataclass(frozen=True)
class Program:
    steps: tuple[Step, ...]
    inputs: int  # the epilogue inputs the steps may read (CHANNEL indices are below it)
    ops: tuple[str, ...] = field(default=())

    def c_table(self, name: str) -> str:
        if not self.steps:  # (C++ has no empty array: the launcher passes no steps)
            return f"static const sc_conv_epi_step* const {name} = nullptr;\n"
        rows = ",\n".join(f"    {s.c()}" for s in self.steps)
        return f"static const sc_conv_epi_step {name}[] = {{\n{rows}\n}};\n"


def _c_float(v: float) -> str:
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"{float(v)!r}f"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# Views that keep their elements' order: a [C] operand read through them is its input's values in order.
_RESHAPES = {"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten"}
# Ops that hand a constant on unchanged (what tracing torch.tensor(c) in forward leaves).
_PASS = {"lift_fresh_copy", "detach", "clone", "alias"}


class _Walk:
    def __init__(self, nodes: dict[str, Node], members: set[str], value: str, inputs: Sequence[KernelArg],
                 channels: int):
        self.nodes, self.members, self.value = nodes, members, value
        self.input_index = {a.name: k for k, a in enumerate(inputs)}
        self.channels = channels
        self.steps: list[Step] = []
        self.last: dict[str, int] = {}  # member node -> the step giving its value

    def source(self, arg: Any) -> Source:
        number = _number(arg)
        if number is not None:
            return Source(SCALAR, value=number)
        name = ref_name(arg)
        if name is None:
            raise NotSupported(f"cuDNN epilogue: operand {arg!r}")
        if name == self.value:
            return Source(CONV)
        if name in self.last:
            return Source(STEP, self.last[name])
        constant = self.constant(name)
        if constant is not None:
            return Source(SCALAR, value=constant)
        return Source(CHANNEL, self._channel_input(name))

    def constant(self, name: str) -> float | None:
        """The number a one-element constant tensor holds (torch.tensor(0.5) in forward: a constant
        node, read through lift_fresh_copy and detach), else None."""
        node = self.nodes.get(name)
        while node is not None and node["op"] in _PASS and node["name"] in self.members:
            node = self.nodes.get(ref_name(node["args"].get("self")) or "")
        if node is None or node["op"] != "constant" or node.get("dtype") != "float32":
            return None
        value = node.get("value")
        return _number(value[0]) if isinstance(value, list) and len(value) == 1 else None

    def _channel_input(self, name: str) -> int:
        """The epilogue input a [C] view reads, wholly and in order."""
        node = self.nodes.get(name)
        if node is None or list(node.get("shape") or []) != [self.channels] or node.get("dtype") != "float32" \
                or list(node.get("stride") or [1]) != [1]:
            raise NotSupported(f"cuDNN epilogue: {name} is not a per-channel fp32 operand")
        while node["name"] in self.members and node.get("view"):
            if node["op"] not in _RESHAPES:
                raise NotSupported(f"cuDNN epilogue: {name} reads through a {node['op']}")
            node = self.nodes[ref_name(node["args"].get("self")) or ""]
        numel = math.prod(node.get("shape") or [0])
        if node["name"] not in self.input_index or numel != self.channels or node.get("offset", 0) != 0 \
                or (node.get("stride") is not None and not is_contiguous(node)):
            raise NotSupported(f"cuDNN epilogue: {name} does not read one input's {self.channels} values in order")
        return self.input_index[node["name"]]

    def emit(self, name: str, steps: list[Step]) -> None:
        first = len(self.steps)
        # Steps name their operands relative to the list: an op's own later steps read its earlier ones.
        self.steps += steps
        self.last[name] = first + len(steps) - 1


def _binary(mode: str) -> Callable[[_Walk, Node], list[Step]]:
    def make(w: _Walk, n: Node) -> list[Step]:
        a = n["args"]
        alpha = _number(a.get("alpha", 1))
        other = w.source(a.get("other"))
        if alpha is None or (alpha != 1 and other.kind != SCALAR):
            raise NotSupported(f"cuDNN epilogue: {n['name']} alpha {a.get('alpha')!r}")
        if alpha != 1:
            other = Source(SCALAR, value=other.value * alpha)
        if n["op"] == "div" and a.get("rounding_mode") is not None:
            raise NotSupported(f"cuDNN epilogue: {n['name']} rounds")
        return [Step(mode, w.source(a.get("self")), other)]

    return make


def _unary(mode: str, attr: str | None = None, arg: str | None = None, default: float = 0.0) -> Callable[[_Walk, Node], list[Step]]:
    def make(w: _Walk, n: Node) -> list[Step]:
        a = n["args"]
        value = _number(a.get(arg, default)) if arg else None
        if arg and value is None:
            raise NotSupported(f"cuDNN epilogue: {n['name']} {arg}={a.get(arg)!r}")
        return [Step(mode, w.source(a.get("self")), attr=(attr, value) if attr else None)]

    return make


def _clamp(lo_key: str | None, hi_key: str | None, lo_default: float | None = None,
           hi_default: float | None = None) -> Callable[[_Walk, Node], list[Step]]:
    def make(w: _Walk, n: Node) -> list[Step]:
        a = n["args"]
        lo = _number(a.get(lo_key)) if lo_key and a.get(lo_key) is not None else lo_default
        hi = _number(a.get(hi_key)) if hi_key and a.get(hi_key) is not None else hi_default
        if (lo_key and a.get(lo_key) is not None and lo is None) or (hi_key and a.get(hi_key) is not None and hi is None):
            raise NotSupported(f"cuDNN epilogue: {n['name']} bounds that are not numbers")
        out: list[Step] = []
        src = w.source(a.get("self"))
        if lo is not None:
            out.append(Step("MAX", src, Source(SCALAR, value=lo)))
            src = Source(STEP, len(w.steps))
        if hi is not None:
            out.append(Step("MIN", src, Source(SCALAR, value=hi)))
        if not out:
            raise NotSupported(f"cuDNN epilogue: {n['name']} without bounds")
        return out

    return make


def _gelu(w: _Walk, n: Node) -> list[Step]:
    approximate = n["args"].get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise NotSupported(f"cuDNN epilogue: gelu approximate={approximate!r}")
    return [Step("GELU_FWD" if approximate == "none" else "GELU_APPROX_TANH_FWD", w.source(n["args"].get("self")))]


def _elu(w: _Walk, n: Node) -> list[Step]:
    a = n["args"]
    if _number(a.get("scale", 1)) != 1 or _number(a.get("input_scale", 1)) != 1 or _number(a.get("alpha", 1)) is None:
        raise NotSupported(f"cuDNN epilogue: {n['name']} scales")
    return [Step("ELU_FWD", w.source(a.get("self")), attr=("elu_alpha", float(a.get("alpha", 1))))]


def _mish(w: _Walk, n: Node) -> list[Step]:
    # x * tanh(softplus(x)): where softplus overflows (x > 88) tanh gives 1 and the product x, as it should.
    x, k = w.source(n["args"].get("self")), len(w.steps)
    return [Step("SOFTPLUS_FWD", x, attr=("softplus_beta", 1.0)), Step("TANH_FWD", Source(STEP, k)),
            Step("MUL", x, Source(STEP, k + 1))]


def _hard(times_input: bool) -> Callable[[_Walk, Node], list[Step]]:
    """hardsigmoid, clamp(x + 3, 0, 6) / 6, and hardswish, x times that (as codegen's table has them)."""

    def make(w: _Walk, n: Node) -> list[Step]:
        x, k = w.source(n["args"].get("self")), len(w.steps)
        steps = [Step("ADD", x, Source(SCALAR, value=3.0)), Step("MAX", Source(STEP, k), Source(SCALAR, value=0.0)),
                 Step("MIN", Source(STEP, k + 1), Source(SCALAR, value=6.0))]
        if times_input:
            steps.append(Step("MUL", x, Source(STEP, k + 2)))
        return [*steps, Step("MUL", Source(STEP, k + len(steps) - 1), Source(SCALAR, value=1.0 / 6.0))]

    return make


# aten op -> its cuDNN pointwise steps.
TABLE: dict[str, Callable[[_Walk, Node], list[Step]]] = {
    "add": _binary("ADD"),
    "sub": _binary("SUB"),
    "mul": _binary("MUL"),
    "div": _binary("DIV"),
    "maximum": _binary("MAX"),
    "minimum": _binary("MIN"),
    "relu": _unary("RELU_FWD"),
    "leaky_relu": _unary("RELU_FWD", "relu_slope", "negative_slope", 0.01),
    "sigmoid": _unary("SIGMOID_FWD"),
    "tanh": _unary("TANH_FWD"),
    "silu": lambda w, n: [Step("SWISH_FWD", w.source(n["args"].get("self")), attr=("swish_beta", 1.0))],
    "gelu": _gelu,
    "elu": _elu,
    "exp": _unary("EXP"),
    "log": _unary("LOG"),
    "neg": _unary("NEG"),
    "abs": _unary("ABS"),
    "sqrt": _unary("SQRT"),
    "rsqrt": _unary("RSQRT"),
    "erf": _unary("ERF"),
    "clamp": _clamp("min", "max"),
    "clip": _clamp("min", "max"),
    "clamp_min": _clamp("min", None),
    "clamp_max": _clamp(None, "max"),
    "hardtanh": _clamp("min_val", "max_val", -1.0, 1.0),
    "relu6": _clamp(None, None, 0.0, 6.0),
    "mish": _mish,
    "hardswish": _hard(True),
    "hardsigmoid": _hard(False),
}


def translate(nodes: dict[str, Node], members: Sequence[str], end: str, value: str, inputs: Sequence[KernelArg],
              channels: int) -> Program:
    """The epilogue computing `end` from `members` (in graph order) and the convolution's channels-last
    result `value`, as cuDNN pointwise steps, `end` the last; NotSupported where one has no step."""
    w = _Walk(nodes, set(members), value, inputs, channels)
    ops: list[str] = []
    for name in members:
        node = nodes[name]
        if node.get("view") or (node["op"] in _PASS and w.constant(name) is not None):
            continue  # resolved where a step reads it: a [C] view of an input or a number, or refused there
        make = TABLE.get(node["op"])
        if make is None:
            raise NotSupported(f"cuDNN epilogue: no cuDNN step for {node['op']}")
        if node.get("dtype") != "float32":
            raise NotSupported(f"cuDNN epilogue: {name} is {node.get('dtype')}")
        w.emit(name, make(w, node))
        ops.append(node["op"])
    if not w.steps or end not in w.last or w.last[end] != len(w.steps) - 1:
        raise NotSupported("cuDNN epilogue: the chain does not end at its last member")
    if any(s.a.kind == SCALAR and (s.b is None or s.b.kind == SCALAR) for s in w.steps):
        raise NotSupported("cuDNN epilogue: a step on numbers alone")
    return Program(tuple(w.steps), len(inputs), tuple(ops))
