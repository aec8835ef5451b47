"""Weight normalisation (torch.nn.utils.weight_norm and its parametrization; aten._weight_norm_interface)
rewritten into what it computes: w = v * (g / ||v||), the norm over every dim but `dim` (over all of v
where dim is -1). The square, the sum, the square root and the scale join the planner's reductions and
pointwise work; each forward recomputes w from v and g, as the module does. The picked results keep
their getitems' names, so every reader is unchanged. Found while trying vocoder- and WaveNet-style
blocks (weight-normed convolutions), 2026-11-29."""

from __future__ import annotations

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    new_node,
    picks,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh
from stitchcuda.agents.plan.linear_reductions import REDUCTION_TARGETS


def decompose_weight_norm(graph: list[Node]) -> list[Node]:
    chosen = picks(graph)
    return rewrite_nodes(graph, lambda node, nodes, readers, taken: _decomposed(node, nodes, taken, chosen))


def _decomposed(node: Node, nodes: dict[str, Node], taken: set[str], chosen: dict[str, list[Node]]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "_weight_norm_interface":
        return None
    args = node.get("args", {})
    v = nodes.get(ref_name(args.get("v")) or "")
    g = nodes.get(ref_name(args.get("g")) or "")
    dim = args.get("dim", 0)
    if v is None or g is None or type(dim) is not int or not v.get("shape") or g.get("shape") is None:
        return None
    if v.get("dtype") not in FLOAT_DTYPES or g.get("dtype") != v["dtype"]:
        return None
    rank = len(v["shape"])
    if dim == -1:
        over, keep, norm_shape = list(range(rank)), False, []
    elif 0 <= dim < rank:
        over, keep = [d for d in range(rank) if d != dim], True
        norm_shape = [s if d == dim else 1 for d, s in enumerate(v["shape"])]
    else:
        return None
    if list(g["shape"]) != norm_shape:
        return None
    gets = {n["args"].get("index"): n for n in chosen.get(node["name"], [])}
    if set(gets) - {0, 1}:
        return None
    dtype, base = v["dtype"], node["name"]

    def name(index: int, what: str) -> str:
        return gets[index]["name"] if index in gets else _fresh(taken, f"{base}_{what}")

    def made(new: str, op: str, a: dict, shape: list[int], target: str) -> Node:
        return new_node(new, op, a, shape, contiguous_strides(shape), dtype, view=False, target=target)

    square, total, scale = (_fresh(taken, f"{base}_{s}") for s in ("squared", "sum", "scale"))
    norm, w = name(1, "norm"), name(0, "weight")
    return [
        made(square, "mul", {"self": ref(v["name"]), "other": ref(v["name"])}, list(v["shape"]), "aten.mul.Tensor"),
        made(total, "sum", {"self": ref(square), "dim": over, "keepdim": keep, "dtype": None}, norm_shape,
             REDUCTION_TARGETS["sum"]),
        made(norm, "sqrt", {"self": ref(total)}, norm_shape, "aten.sqrt.default"),
        made(scale, "div", {"self": ref(g["name"]), "other": ref(norm)}, norm_shape, "aten.div.Tensor"),
        made(w, "mul", {"self": ref(v["name"]), "other": ref(scale)}, list(v["shape"]), "aten.mul.Tensor"),
    ], {n["name"] for n in gets.values()}
