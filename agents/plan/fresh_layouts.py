"""A kernel's result traced in a non-contiguous layout is stored contiguous instead.

PyTorch's convolution (and norms, pools) follow their input's memory format: a tensor permuted
from [N, H, W, C] to [N, C, H, W] without .contiguous(), as SegFormer's and PVT's blocks pass a
linear layer's output to a convolution, makes the convolution's result channels-last, and ops
after it in the trace inherit that layout. The layout of a fresh result is not part of its value:
the kernel may store it row-major, and readers that take it as an operand read it with the strides
its node says. Views of it (a reshape, a transpose: graph.LOGICAL_VIEWS) are replayed on the new
layout, on meta tensors, to find their own strides; where one cannot be (a reshape that only the
traced layout allowed without a copy) or a reader writes into it, the result keeps its traced
layout and the planner says why it cannot be planned. Pointwise results stay as traced: the
pointwise emitter writes any layout."""

from __future__ import annotations

from stitchcuda.agents.coder import codegen
from stitchcuda.agents.graph import (
    Node,
    contiguous_strides,
    is_contiguous,
    readers_of,
    replay_view,
)

_NOT_FRESH = ("input", "constant", "output")


def store_kernel_results_contiguous(graph: list[Node], keep: frozenset[str] = frozenset(),
                                    only: frozenset[str] | None = None) -> list[Node]:
    """`keep`: results left in their traced layout (channels_last_inputs rewrites those convolutions);
    `only`: the results to look at, where not all."""
    readers = readers_of(graph)
    changed: dict[str, Node] = {}
    for node in graph:
        if node["name"] in keep or (only is not None and node["name"] not in only) or not _candidate(node):
            continue
        base = {**node, "stride": contiguous_strides(node["shape"]), "offset": 0}
        views = _replayed_views(base, readers)
        if views is not None:
            changed[node["name"]] = base
            changed.update(views)
    return [changed.get(n["name"], n) for n in graph] if changed else graph


def _candidate(node: Node) -> bool:
    op = node["op"]
    if op in _NOT_FRESH or node.get("view") or node.get("shape") is None or is_contiguous(node):
        return False
    # (in place, or pointwise; a getitem of a multi-result kernel is that kernel's result)
    return not op.endswith("_") and codegen.pointwise_support(node) is not None


def _replayed_views(base: Node, readers: dict[str, list[Node]]) -> dict[str, Node] | None:
    """Every view reading `base` (and views of those) with strides and offset as they are on base's
    new layout; None where a reader writes into it or a view cannot be replayed."""
    out: dict[str, Node] = {}
    todo = [base]
    while todo:
        src = todo.pop()
        for r in readers.get(src["name"], []):
            if r["op"].endswith("_") or r["op"] in ("copy_", "set_"):
                return None
            if r["op"] == "getitem" and not r.get("view"):
                continue  # a multi-result kernel's result: not a view of this one
            if not r.get("view"):
                continue
            got = _replay(r, src)
            if got is None:
                return None
            out[r["name"]] = got
            todo.append(got)
    return out


def _replay(view: Node, src: Node) -> Node | None:
    got = replay_view(view, src["name"], src["shape"], src["stride"], src.get("offset", 0))
    if got is None:
        return None
    return {**view, "stride": got[0], "offset": got[1]}
