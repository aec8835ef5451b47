"""An average pool after a 1x1 convolution, moved before it.

A 1x1 convolution (stride 1, no padding) is the same linear map of the channels at every pixel, and
an average pool without padding takes averages of pixels, with weights that sum to one: the two
commute, bias and all (the average of W x + b is W avg(x) + b). Pooled first, the convolution sees
the pool's fewer pixels: DenseNet's transition layer (BN, ReLU, 1x1 conv, 2x2 average pool) runs
its GEMM on a quarter of the pixels and never writes the full-size result. Moved only where the
pool shrinks what the convolution reads and writes by at least a fifth.

The convolution keeps the pool's name, so every reader is unchanged. Found while profiling level 3's
DenseNet121TransitionLayer, 2026-11-28 (0.77x torch.compile: the full-size convolution result was
written, then pooled)."""

from __future__ import annotations

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    new_node,
    numel,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh

AVG_POOLS = {"avg_pool1d": 1, "avg_pool2d": 2, "avg_pool3d": 3}  # op -> spatial dims


def pool_before_pointwise_convs(graph: list[Node]) -> list[Node]:
    return rewrite_nodes(graph, _moved)


def _moved(node: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    conv = _movable(node, nodes, readers)
    if conv is None:
        return None
    x = nodes[ref_name(conv["args"]["input"])]
    pooled_shape = [*x["shape"][:2], *node["shape"][2:]]
    pooled = _fresh(taken, f"{x['name']}_pooled")
    return [
        new_node(pooled, node["op"], {**node["args"], "self": ref(x["name"])}, pooled_shape,
                 contiguous_strides(pooled_shape), x["dtype"], view=False, target=node.get("target")),
        {**conv, "name": node["name"], "args": {**conv["args"], "input": ref(pooled)},
         "shape": list(node["shape"]), "stride": contiguous_strides(node["shape"]), "offset": 0,
         "folded": f"the {node['op']} after 1x1 convolution {conv['name']} taken before it (the two commute): "
                   "the convolution runs on the pooled pixels"},
    ], {conv["name"]}


def _movable(pool: Node, nodes: dict[str, Node], readers: dict[str, int]) -> Node | None:
    """The 1x1 convolution `pool` averages, where the pool may go first and that pays."""
    nd = AVG_POOLS.get(pool["op"])
    args = pool.get("args", {})
    conv = nodes.get(ref_name(args.get("self")) or "")
    if nd is None or conv is None or conv["op"] != "convolution" or readers.get(conv["name"], 0) != 1:
        return None
    if any(args.get("padding") or [0]) or args.get("divisor_override") is not None:
        return None
    c = conv["args"]
    x = nodes.get(ref_name(c.get("input")) or "")
    w = nodes.get(ref_name(c.get("weight")) or "")
    if x is None or w is None or not x.get("shape") or not w.get("shape") or not conv.get("shape") or not pool.get("shape"):
        return None
    if c.get("transposed") or len(conv["shape"]) != nd + 2 or len(x["shape"]) != nd + 2:
        return None
    if any(s != 1 for s in w["shape"][2:]) or any(s != 1 for s in c.get("stride", [1])) or any(c.get("padding", [0])):
        return None
    if conv.get("dtype") not in FLOAT_DTYPES or x.get("dtype") != conv["dtype"]:
        return None
    # The convolution reads x and writes its result; pooled first it reads and writes the pooled
    # sizes, and the pool reads x and writes the pooled x instead.
    before = numel(conv["shape"])
    after = numel(x["shape"]) * numel(pool["shape"]) // before
    return conv if numel(pool["shape"]) < before and after <= 0.8 * before else None
