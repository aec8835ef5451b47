"""A batched product read only through a transpose of its last two dims, computed transposed.

(A B)^T = B^T A^T: where the only reader of a bmm's result (through views that keep its elements in
place) is `transpose(1, 2)`, the bmm of the operands' transposes has that transpose's shape and is
stored row-major in it, so whatever reads it next reads it contiguous. cuBLAS takes each operand's
transpose as an op flag (emit_gemm reads operands in place from their strides), so the product costs
what it cost. NetVLAD (level 3's 47) computes `(assignment^T x)^T - a` and normalises over the
features: read through the transpose, the norm's loader walked 2 KB strides (158.6 + 171.1 us for
two norms over a 128 MB operand on the H100, bench/results/2026-12-07-h100-l3-full-siblings-1c8283f.md).

The transpose keeps its name, now the product's, so every reader is unchanged.
STITCHCUDA_GEMM_TRANSPOSED=1 turns it on (off by default until measured on a GPU)."""

from __future__ import annotations

import os

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    is_contiguous,
    new_node,
    node_inputs,
    ref,
    ref_name,
    replayed_view,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh

# On by default ("0" turns it off): on the H100 at 575b024 (probe-ab, one process) level 3's
# NetVLAD went from 963.7 to 714.5 us (1.35x; 0.99x to 1.41x matched torch.compile in the bench) and
# networks3's qwen2_gqa_attention tied (392.2 against 394.4 us):
# bench/results/2026-12-07-h100-transposed-share-cat-ab-575b024.md.
TRANSPOSED_ENV = "STITCHCUDA_GEMM_TRANSPOSED"
# Views that leave every element of a row-major tensor where it is.
_SAME_PLACE = {"view", "_unsafe_view", "reshape", "alias"}


def transposed_products_on() -> bool:
    return os.environ.get(TRANSPOSED_ENV, "1") != "0"


def compute_transposed_products(graph: list[Node]) -> list[Node]:
    if not transposed_products_on():
        return graph
    # A view of the transpose keeps the strides it was traced with, on the transposed layout: where
    # one reads it, the transpose stays (it would read the product's new layout wrongly).
    viewed = {src for node in graph if node.get("view") for src in node_inputs(node)}

    def rewrite(node: Node, nodes: dict[str, Node], readers: dict[str, int],
                taken: set[str]) -> tuple[list[Node], set[str]] | None:
        return None if node["name"] in viewed else _transposed(node, nodes, readers, taken)

    return rewrite_nodes(graph, rewrite)


def _transposed(node: Node, nodes: dict[str, Node], readers: dict[str, int],
                taken: set[str]) -> tuple[list[Node], set[str]] | None:
    found = _product_under(node, nodes, readers)
    if found is None:
        return None
    product, between = found
    a, b = (nodes[ref_name(product["args"][k]) or ""] for k in ("self", "mat2"))
    views = []
    for src in (b, a):
        shape = [*src["shape"][:-2], src["shape"][-1], src["shape"][-2]]
        view = replayed_view(_fresh(taken, f"{src['name']}_t"), "transpose", {"self": ref(src["name"]), "dim0": -2, "dim1": -1},
                             src, shape, "aten.transpose.int")
        if view is None:
            return None
        views.append(view)
    shape = list(node["shape"])
    # (Any other argument, a folded scalar's alpha, scales the transpose alike.)
    made = new_node(node["name"], "bmm", {**product["args"], "self": ref(views[0]["name"]), "mat2": ref(views[1]["name"])},
                    shape, contiguous_strides(shape), product["dtype"], view=False,
                    target=product.get("target") or "aten.bmm.default")
    made["folded"] = f"{product['name']} read only through this transpose: computed as B^T A^T, stored as read"
    return [*views, made], {product["name"], *between}


def _product_under(node: Node, nodes: dict[str, Node], readers: dict[str, int]) -> tuple[Node, list[str]] | None:
    """(the bmm `node` transposes, the same-place views between them), where `node` swaps the last
    two dims of a 3-d floating bmm result that nothing else reads."""
    if node.get("op") != "transpose" or len(node.get("shape") or []) != 3:
        return None
    dims = {d % 3 for d in (node["args"].get("dim0"), node["args"].get("dim1")) if isinstance(d, int)}
    if dims != {1, 2}:
        return None
    between: list[str] = []
    src = nodes.get(ref_name(node["args"].get("self")) or "")
    while src is not None and src.get("view") and src["op"] in _SAME_PLACE and readers.get(src["name"], 0) == 1:
        if list(src["shape"]) != list(node["shape"][:1]) + [node["shape"][2], node["shape"][1]] or not is_contiguous(src):
            return None
        between.append(src["name"])
        src = nodes.get(ref_name(src["args"].get("self")) or "")
    if src is None or src["op"] != "bmm" or src.get("view") or readers.get(src["name"], 0) != 1:
        return None
    if src.get("dtype") not in FLOAT_DTYPES or not is_contiguous(src) or src.get("offset", 0):
        return None
    if list(src["shape"]) != [node["shape"][0], node["shape"][2], node["shape"][1]]:
        return None
    return src, between
