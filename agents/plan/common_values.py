"""A value the traced forward computes twice from the same operands is computed once.

A module that calls the same weight-normalised layer on two inputs (MelGAN's discriminators over the
real and the generated waveform), a loss that takes `log_softmax(x)` in two of its terms, or a
regulariser that forms the same covariance twice traces each of those as separate nodes: with the
same op, the same operands and the same arguments, they hold the same values, and every later
reader can read the first. torch.compile's graph does the same (Inductor's common-subexpression
pass); without it our candidate ran each library call and reduction again.

Only kernels are shared (reductions, matrix products, convolutions, norms, softmaxes: anything that
is neither a view nor pointwise work), with the getitems that pick their results. Views and
pointwise nodes are compared through (so `mm(x.t(), y)` and a second `mm(x.t(), y)` over a view of
its own match) but stay as they are: a pointwise value computed in two fused kernels costs nothing
more than one read, and sharing it could make a fused value a stored one.

Never shared: random draws, allocations whose values are written later, in-place ops and training
norms (which update their running statistics), whatever reads storage something writes (it may read
it before or after the write), and a value forward returns (two returned tensors would then be one
object).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Hashable, Sequence
from typing import Any

from stitchcuda.agents.coder import codegen
from stitchcuda.agents.graph import Node, by_name, iter_refs, ref_name, rename_refs, view_root

# "0" in the environment computes every traced value where it was traced (for A/B runs).
SHARE_ENV = "STITCHCUDA_SHARE_VALUES"

# Ops whose result is not a function of their operands, besides those ATen tags so (_seeded): draws
# (those draws_as_inputs does not take as inputs), allocations, whatever reads the random state.
_NOT_FUNCTIONS = {
    "empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "bernoulli",
    "native_dropout", "dropout", "normal", "normal_functional", "uniform", "exponential", "poisson",
    "multinomial", "rrelu_with_noise", "cauchy", "geometric", "log_normal",
}
_STRUCTURAL = {"input", "output", "constant", "placeholder"}


def share_values_on() -> bool:
    return os.environ.get(SHARE_ENV, "1") != "0"


def share_common_values(graph: Sequence[Node]) -> list[Node]:
    """The graph with each kernel node that repeats an earlier one (same op, operands, arguments
    and result layout) dropped, and its readers reading the earlier one."""
    graph = list(graph)
    if not share_values_on():
        return graph
    nodes = by_name(graph)
    # Storage something writes (an in-place op's first operand, a training norm's running statistics),
    # through views: a node reading it may read it before or after the write, so none is keyed.
    written = {view_root(nodes, r)["name"] for n in graph for r in _writes(n) if r in nodes}
    returned = _returned_roots(graph, nodes)
    same: dict[str, str] = {}  # node -> the earlier node holding its values (for comparing readers' operands)
    first: dict[Hashable, str] = {}
    shared: dict[str, str] = {}  # dropped node -> the node its readers read instead
    for node in graph:
        name = node["name"]
        if node["op"] in _STRUCTURAL or node["op"] in _NOT_FUNCTIONS or _writes(node) \
                or _seeded_or_mutating(node.get("target")):
            continue
        if any(view_root(nodes, r)["name"] in written for r in iter_refs(node.get("args", {})) if r in nodes) \
                or view_root(nodes, name)["name"] in written:
            continue
        key = _key(node, same)
        if key is None:
            continue
        earlier = first.setdefault(key, name)
        if earlier == name:
            continue
        same[name] = earlier
        if name in returned or earlier in returned:
            continue
        picked = node["op"] == "getitem" and ref_name(node["args"].get("self")) in shared
        if picked or _is_kernel(node):
            shared[name] = earlier
    if not shared:
        return graph
    out: list[Node] = []
    for node in graph:
        if node["name"] in shared:
            continue
        if any(r in shared for r in iter_refs(node.get("args", {}))):
            node = {**node, "args": rename_refs(node["args"], shared)}
        out.append(node)
    return out


# Arguments a training-mode norm updates in place (its running statistics), though ATen's schema for
# native_batch_norm marks none as written.
_RUNNING = ("running_mean", "running_var")


def _writes(node: Node) -> list[str]:
    """The nodes `node` writes: an in-place op's first operand (aten's naming: copy_, add_, fill_),
    the operands its schema marks written, a training norm's running statistics; [] for the rest."""
    args = node.get("args", {})
    out = list(iter_refs(args))[:1] if node["op"].endswith("_") else []
    out += [r for key in _written_args(node.get("target")) if (r := ref_name(args.get(key))) is not None]
    if args.get("training") is True or args.get("train") is True:
        out += [r for key in _RUNNING if (r := ref_name(args.get(key))) is not None]
    return out


def _aten_op(target: str | None) -> Any:
    """The OpOverload an "aten.name.overload" target names; None for another or an unknown one."""
    import torch

    try:
        ns, name, overload = (target or "").split(".")
        return getattr(getattr(torch.ops.aten, name), overload) if ns == "aten" else None
    except (AttributeError, ValueError):
        return None


@functools.cache
def _written_args(target: str | None) -> tuple[str, ...]:
    op = _aten_op(target)
    if op is None:
        return ()
    return tuple(a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write)


@functools.cache
def _seeded_or_mutating(target: str | None) -> bool:
    """Whether ATen says the op draws random numbers or writes an operand (its tags and schema), so
    that a draw or a mutating op this module's list misses is never shared either. An op that cannot
    be looked up (another namespace's, or none known by that name) counts as one; a node with no
    target (a getitem) does not."""
    import torch

    if not target:
        return False
    op = _aten_op(target)
    return op is None or torch.Tag.nondeterministic_seeded in op.tags or op._schema.is_mutable


def _is_kernel(node: Node) -> bool:
    if node.get("view") or node["op"] == "getitem":
        return False
    return codegen.pointwise_support(node) is not None


def _returned_roots(graph: Sequence[Node], nodes: dict[str, Node]) -> set[str]:
    """Every node forward returns, directly or through views, and the views between."""
    out: set[str] = set()
    todo = [r for n in graph if n["op"] == "output" for r in iter_refs(n.get("args", {}))]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        node = nodes.get(name)
        if node is not None and (node.get("view") or node["op"] == "getitem"):
            todo += list(iter_refs(node.get("args", {})))
    return out


def _key(node: Node, same: dict[str, str]) -> Hashable | None:
    try:
        args = _frozen(node.get("args", {}), same)
        outputs = _frozen(node.get("outputs"), same)
    except _Unkeyable:
        return None
    return (node["op"], node.get("target"), bool(node.get("view")), args, outputs,
            tuple(node.get("shape") or ()), tuple(node.get("stride") or ()), node.get("offset"), node.get("dtype"))


class _Unkeyable(Exception):
    pass


def _frozen(value: Any, same: dict[str, str]) -> Hashable:
    name = ref_name(value)
    if name is not None:
        return ("ref", same.get(name, name))
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v, same)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v, same) for v in value)
    if isinstance(value, float):
        if math.isnan(value):
            raise _Unkeyable  # (a nan argument is rare; such a node is simply never shared)
        return ("float", value.hex())  # (0.0 == -0.0 in Python; products by them differ in sign)
    if value is None or isinstance(value, bool | int | str):
        return (type(value).__name__, value)
    raise _Unkeyable
