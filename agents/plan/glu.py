"""F.glu (aten.glu) rewritten into what it computes: the first half of `dim` times the sigmoid of
the second half, two slices (views, no copy), a sigmoid and a product that join the pointwise work
around them as one fused kernel. The product keeps the op's name, so every reader is unchanged.
Found by a sweep of user-style networks (a Conformer's convolution module), 2026-11-28."""

from __future__ import annotations

from stitchcuda.agents.graph import Node, by_name, contiguous_strides, new_node, ref, ref_name
from stitchcuda.agents.graph import fresh_name as _fresh


def decompose_glu(graph: list[Node]) -> list[Node]:
    taken = {n["name"] for n in graph}
    nodes = by_name(graph)
    out: list[Node] = []
    for node in graph:
        out.extend(_glu(node, nodes, taken) or [node])
    return out


def _glu(node: Node, nodes: dict[str, Node], taken: set[str]) -> list[Node] | None:
    if node["op"] != "glu":
        return None
    args = node.get("args", {})
    x = nodes.get(ref_name(args.get("self")) or "")
    dim = args.get("dim", -1)
    if x is None or not x.get("shape") or "stride" not in x or type(dim) is not int or not node.get("shape"):
        return None
    shape, stride = list(x["shape"]), list(x["stride"])
    d = dim % len(shape)
    if shape[d] % 2:
        return None  # PyTorch refuses it; the trace would not have got here
    half = shape[d] // 2
    part = [*shape[:d], half, *shape[d + 1 :]]
    dtype, name = node["dtype"], node["name"]
    a, b, sig = (_fresh(taken, f"{name}_{s}") for s in ("a", "b", "gate"))

    def sliced(new: str, start: int) -> Node:
        return new_node(new, "slice", {"self": ref(x["name"]), "dim": d, "start": start, "end": start + half, "step": 1},
                        part, stride, dtype, view=True, offset=x.get("offset", 0) + start * stride[d],
                        target="aten.slice.Tensor")

    return [
        sliced(a, 0),
        sliced(b, half),
        new_node(sig, "sigmoid", {"self": ref(b)}, part, contiguous_strides(part), dtype, view=False),
        {**node, "op": "mul", "target": "aten.mul.Tensor", "args": {"self": ref(a), "other": ref(sig)}},
    ]
