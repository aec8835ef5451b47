"""The traced graph as plain PyTorch code: `_reference`, the module's own math in aten ops.

A generated ModelNew runs its kernels through a custom op (`torch.library.custom_op`); that op needs
two things the kernels cannot give: output shapes without running (its fake implementation, for
torch.compile and torch.export) and a backward. Both come from the reference's own math, which the
trace already holds node by node. One walker renders each node as a call of its aten overload, with
arguments decoded by the overload's schema (a dtype string becomes `torch.float32`, a device the
inputs' own device); a node it cannot render (a random op, a tensor constant whose values were not
kept) makes the whole function unavailable, and ModelNew then refuses backward with a clear error.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from stitchcuda.agents import trace_rnn
from stitchcuda.agents.coder.batch import BatchInfo
from stitchcuda.agents.graph import Node, node_inputs, overload_of, ref_name

# Mutations of module state (BatchNorm's running statistics) belong to the kernels' forward: the
# reference math is pure, so recomputing it for a backward never updates the statistics twice.
_STATE_WRITES = {"copy_"}


class Unrenderable(Exception):
    """A node the reference math cannot reproduce; the message says which and why."""


@dataclass(frozen=True)
class ReferenceMath:
    text: str  # the `_reference(tensors, state)` function's source
    inputs: tuple[str, ...]  # graph input names, in the order of `tensors` then `state`


def render_reference(
    graph: Sequence[Node],
    tensors: Sequence[str],
    state: Sequence[str],
    returns: Sequence[str],
    *,
    name: str = "_reference",
    batch: BatchInfo | None = None,
) -> ReferenceMath:
    """`def _reference(tensors, state)`: the graph's inputs unpacked in the given orders, every node
    in trace order, and the values of the nodes named in `returns` as a list. Raises Unrenderable.

    With a dynamic `batch`, sizes that are the traced batch (a view's, an expand's, a new tensor's,
    GroupNorm's N) become the batch of the inputs, `_b`."""
    names = _Names()
    lines = [
        f"def {name}(tensors, state):",
        "    # The reference module's forward as traced (aten ops): shapes for the custom op's fake",
        "    # implementation, and the math its backward differentiates.",
    ]
    for group, listed in (("tensors", tensors), ("state", state)):
        if listed:
            lines.append(f"    {', '.join(names.bind(n) for n in listed)}, = {group}")
    first = (list(tensors) + list(state))[:1]
    lines.append(f"    _dev = {names.get(first[0])}.device" if first else "    _dev = None")
    batched = [n for n in tensors if batch is not None and batch.dims.get(n) == 0]
    if batch is not None and batched:
        lines.append(f"    _b = {names.get(batched[0])}.shape[0]")
    else:
        batch = None
    known = set(tensors) | set(state)
    if any(n["op"] == ATTENTION_OP for n in graph):
        lines.append(_ATTENTION_MATH)
    needed = _needed(graph, returns)
    for node in graph:
        op = node["op"]
        if op == "output" or node["name"] in known or node["name"] not in needed:
            continue
        if op == "input":
            if "shape" in node:
                continue  # not read by the graph (else its use fails below: used before computed)
            lines.append(f"    {names.bind(node['name'])} = {literal(node.get('value'))}")
        elif op == "constant":
            lines.append(f"    {names.bind(node['name'])} = {_constant(node)}")
        elif op == "getitem" and node.get("batch_stats"):
            lines.append(f"    {names.bind(node['name'])} = {_batch_stat(node, names)}")
        elif op == "getitem":
            # A split's pieces are traced as views of its input; `source` names the split itself.
            src = names.get(node.get("source") or ref_name(node["args"]["self"]))
            lines.append(f"    {names.bind(node['name'])} = {src}[{int(node['args']['index'])}]")
        elif op in _STATE_WRITES and ref_name(node["args"].get("self")) in known:
            names.alias(node["name"], ref_name(node["args"]["src"]))
        else:
            lines.append(f"    {names.bind(node['name'])} = {_call(node, names, batch)}")
    lines.append(f"    return [{', '.join(names.get(r) for r in returns)}]")
    return ReferenceMath("\n".join(lines) + "\n", (*tensors, *state))


def _needed(graph: Sequence[Node], returns: Sequence[str]) -> set[str]:
    """The nodes the returned values are computed from. A node nothing returned reads is left out:
    the planner's rewrites can leave one reading a node they replaced (scaled_dot_product_attention's
    math path makes the attention weights and drops them; fuse_attention consumed what they read)."""
    nodes = {n["name"]: n for n in graph}
    needed: set[str] = set()
    todo = list(returns)
    while todo:
        name = todo.pop()
        if name in needed or name not in nodes:
            continue
        needed.add(name)
        node = nodes[name]
        todo += node_inputs(node)
        if node.get("source"):
            todo.append(node["source"])
    return needed


def _batch_stat(node: Node, names: _Names) -> str:
    """A training batch norm's save_mean (index 1) or save_invstd (2) where the plan reads them
    (train_bn_prologue): PyTorch gives those results no gradient, so they are computed from the input
    as the mean and rsqrt(var + eps) over the batch and space, which carry it."""
    stats = node["batch_stats"]
    x, dims = names.get(stats["input"]), list(stats["dims"])
    if int(node["args"]["index"]) == 1:
        return f"torch.ops.aten.mean.dim({x}, {dims})"
    var = f"torch.ops.aten.var.correction({x}, {dims}, correction=0)"
    return f"torch.ops.aten.rsqrt.default(torch.ops.aten.add.Tensor({var}, {literal(float(stats['eps']))}))"


ATTENTION_OP = "sc_attention"  # planner.fuse_attention's node (emit_attention.OP)

# The fused attention node as the ops it stands for (emit_attention's docstring says what its
# arguments hold), for the custom op's backward and fake shapes: without it a module whose attention
# was fused had no backward and ran at its traced batch only. Scores are reshaped by their step's
# shape with the leading size left free, so the same text serves any batch.
_ATTENTION_MATH = """\
    def _sc_attention(q, kt, v, masks, steps, out_scale, safe, dtype):
        sq, sk = q.shape[-2], kt.shape[-1]
        s = torch.matmul(q.to(dtype).reshape(-1, sq, q.shape[-1]), kt.to(dtype).reshape(-1, kt.shape[-2], sk))
        for step in steps:
            if step[0] == "scale":
                s = s * step[1]
            elif step[0] == "fill":
                s = s.reshape(-1, *step[3][1:]).masked_fill(masks[step[1]], step[2]).reshape(-1, sq, sk)
            elif step[0] == "add":
                s = (s.reshape(-1, *step[2][1:]) + masks[step[1]]).reshape(-1, sq, sk)
            else:  # causal: keys after query i + diagonal masked
                keep = torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(step[1])
                s = s.masked_fill(~keep, float("-inf"))
        p = torch.ops.aten._safe_softmax.default(s, -1) if safe else torch.softmax(s, -1)
        return torch.matmul(p, v.to(dtype).reshape(-1, sk, v.shape[-1])) * out_scale"""


DIM_NORM_OP = "sc_dim_norm"  # agents/plan/dim_norm.py's node: x normalised over one dim, no weights


def _dim_norm(node: Node, names: _Names) -> str:
    """The norm as the forward wrote it: its mean, biased variance and (x - mean) / sqrt(var + eps)."""
    a = node["args"]
    x, dim = names.get(ref_name(a["input"])), int(a["dim"])
    mu = f"{x}.mean({dim}, keepdim=True)"
    return (f"(({x} - {mu}) / (({x} - {mu}).pow(2).mean({dim}, keepdim=True) + {literal(float(a['eps']))}).sqrt())")


def _attention(node: Node, names: _Names) -> str:
    a = node["args"]
    key_t = (f"{names.get(ref_name(a['key']))}.transpose(-2, -1)" if "key" in a
             else names.get(ref_name(a["key_t"])))
    masks = "[" + ", ".join(names.get(ref_name(m)) for m in a.get("masks", [])) + "]"
    return (f"_sc_attention({names.get(ref_name(a['query']))}, {key_t}, {names.get(ref_name(a['value']))}, "
            f"{masks}, {literal(a['steps'])}, {literal(float(a.get('out_scale', 1.0)))}, {bool(a.get('safe'))}, "
            f"torch.{node['dtype']})")


def _call(node: Node, names: _Names, batch: BatchInfo | None = None) -> str:
    target = node.get("target")
    if node["op"] == trace_rnn.OP:
        return _recurrent(node, names)
    if node["op"] == ATTENTION_OP:
        return _attention(node, names)
    if node["op"] == DIM_NORM_OP:
        return _dim_norm(node, names)
    overload = overload_of(target) if target else None
    if overload is None:
        raise Unrenderable(f"{node['name']}: {node['op']} is not an operator overload")
    if torch.Tag.nondeterministic_seeded in overload.tags:
        # Recomputing a random op for the backward would differentiate other random numbers.
        raise Unrenderable(f"{node['name']}: {target} draws random numbers")
    args = node.get("args", {})
    positional: list[str] = []
    keywords: list[str] = []
    for a in overload._schema.arguments:
        if a.name not in args:
            continue
        text = _value(args[a.name], _kind(str(a.real_type)), names)
        if batch is not None:
            text = _batched(text, args[a.name], a.name, node, batch)
        if a.name in ("input", "self") and args.get("channels_last") and node["op"] != "convolution":
            text = f"{text}.movedim(-1, 1)"  # a norm or pool of channels-last storage (planner.channels_last_convs)
        if a.name == "input" and args.get("input_channels_last") and node["op"] == "convolution":
            text = f"{text}.movedim(-1, 1)"  # an earlier convolution's channels-last tail read as its input
        if a.kwarg_only:
            keywords.append(f"{a.name}={text}")
        else:
            positional.append(text)
    call = f"torch.ops.{target}({', '.join(positional + keywords)})"
    alpha = args.get("alpha")
    if alpha is not None and alpha != 1 and not any(a.name == "alpha" for a in overload._schema.arguments):
        # A scale the planner folded into a product that has no alpha of its own (fold_gemm_scalars:
        # mm, bmm): (c x) @ y = c (x @ y). Left out, the backward's math missed it.
        call = f"torch.ops.aten.mul.Tensor({call}, {literal(alpha)})"
    if node["op"] == "convolution" and args.get("channels_last"):
        return f"{call}.movedim(1, -1).contiguous()"  # stored N, spatial..., C (planner.channels_last_convs)
    if node["op"] == "convolution" and args.get("input_channels_last"):
        return f"{call}.contiguous()"  # NCHW as our kernel stores it (aten would follow its input's layout)
    if args.get("channels_last") and node.get("outputs") is None:  # a pool's one result, stored so
        return f"{call}.movedim(1, -1).contiguous()"
    if args.get("channels_last"):  # a norm's normalised result (a pool's values) stored so, the rest as it is
        return f"(lambda _r: (_r[0].movedim(1, -1).contiguous(), *_r[1:]))({call})"
    return call


def _recurrent(node: Node, names: _Names) -> str:
    """The trace's one recurrent node as PyTorch's own entry point (torch._VF, what nn.LSTM/GRU/RNN
    call), so the kept file needs no op of ours: a 3-tuple (output, h_n, c_n; None for c_n but LSTM's)."""
    a = node["args"]
    mode = a["mode"]
    x, h = names.get(ref_name(a["input"])), names.get(ref_name(a["hx"]))
    state = f"({h}, {names.get(ref_name(a['cx']))})" if mode == "lstm" else h
    params = "[" + ", ".join(names.get(ref_name(p)) for p in a["params"]) + "]"
    flags = ", ".join(repr(a[k]) for k in ("has_biases", "num_layers", "dropout", "train", "bidirectional", "batch_first"))
    call = f"torch._VF.{mode}({x}, {state}, {params}, {flags})"
    return call if mode == "lstm" else f"(*{call}, None)"


def _batched(text: str, value: Any, arg: str, node: Node, batch: BatchInfo) -> str:
    """The argument with the traced batch size made the inputs' batch, where it is one."""
    bdim = batch.dims.get(node["name"])
    if bdim is None:
        return text
    shape = node.get("shape") or []
    if (isinstance(value, list) and len(value) == len(shape) and all(isinstance(v, int) for v in value)
            and all(v in (s, -1) for v, s in zip(value, shape, strict=True)) and value[bdim] == shape[bdim]):
        # A size list of this very result (-1: "as the input's", as expand takes it).
        factor = batch.factors.get(node["name"], 1)
        rows = "_b" if factor == 1 else f"_b * {factor}"
        return "[" + ", ".join(rows if i == bdim else str(v) for i, v in enumerate(value)) + "]"
    if arg == "N" and node["op"] == "native_group_norm" and value == batch.size:
        return "_b"
    return text


def _kind(schema_type: str) -> str:
    """`Optional[List[ScalarType]]` -> `ScalarType[]`: what an argument holds, in the walker's terms."""
    while schema_type.startswith("Optional[") and schema_type.endswith("]"):
        schema_type = schema_type[len("Optional[") : -1]
    if schema_type.startswith("List[") and schema_type.endswith("]"):
        return _kind(schema_type[len("List[") : -1]) + "[]"
    return schema_type


def _value(value: Any, kind: str, names: _Names) -> str:
    name = ref_name(value)
    if name is not None:
        return names.get(name)
    if value is None:
        return "None"
    if isinstance(value, list):
        inner = kind[:-2] if kind.endswith("[]") else kind
        return "[" + ", ".join(_value(v, inner, names) for v in value) + "]"
    if isinstance(value, dict):
        raise Unrenderable(f"a tensor argument not produced by the graph ({value})")
    if kind == "ScalarType":
        return f"torch.{value}"
    if kind == "Device":
        # Traced on the CPU; the kernels (and this math) run where the inputs are.
        return "_dev"
    if kind in ("Layout", "MemoryFormat") and isinstance(value, str) and value.startswith("torch."):
        return value
    return literal(value)


def literal(value: Any) -> str:
    """A Python literal for a traced value (inf and nan as float('inf'), float('nan'))."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    raise Unrenderable(f"a value that cannot be written as a literal: {value!r}")


def _constant(node: Node) -> str:
    if node.get("shape") is None:
        return literal(node.get("value"))
    if "value" not in node:
        raise Unrenderable(f"constant {node['name']}: its values were not kept by the trace")
    return (
        f"torch.tensor({literal(node['value'])}, dtype=torch.{node['dtype']}, device=_dev)"
        f".reshape({tuple(node['shape'])!r})"
    )


class _Names:
    """Graph node names (state keys such as `bn.weight` among them) as Python identifiers."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.taken = {"tensors", "state", "_dev", "torch", "_sc_attention"}

    def bind(self, node: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in node) or "v"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = f"v_{base}"
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        self.bound[node] = name
        return name

    def alias(self, node: str, other: str | None) -> None:
        if other is None or other not in self.bound:
            raise Unrenderable(f"{node}: writes a value the graph does not hold")
        self.bound[node] = self.bound[other]

    def get(self, node: str | None) -> str:
        if node is None or node not in self.bound:
            raise Unrenderable(f"{node}: used before it is computed")
        return self.bound[node]
