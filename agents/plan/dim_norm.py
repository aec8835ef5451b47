"""A norm written by hand over one dim that is not the last, as one `sc_dim_norm` node.

The channels of an NCHW tensor normalised at every pixel (NAFNet's and SAM's LayerNorm2d, ConvNeXt's
channels_first LayerNorm) are written as

    mu = x.mean(d, keepdim=True)
    var = (x - mu).pow(2).mean(d, keepdim=True)          # or (x - mu) * (x - mu)
    y = (x - mu) / (var + eps).sqrt()                     # or (x - mu) * (var + eps).rsqrt()

which the planner ran as two column reductions and a pointwise pass: x read three times. As one node
the norm reads x once, holding a column's values in registers (emit_norm's fused shape, a thread a
column: neighbouring columns are neighbouring in memory, so each read is coalesced), and the affine
and whatever pointwise work follows is its epilogue. Found on bench/networks2's NAFNet block
(2026-12-04: its two LayerNorm2d as six of the block's sixteen kernels).

The node is the biased variance's norm as written: (x - mean) / sqrt(var + eps) with var the mean of
squared deviations; it keeps the division's name, so every reader is unchanged. Only where nothing
else reads the mean, the variance or the deviations, and x is a dense float tensor."""

from __future__ import annotations

import os

# (The emitter's limit, a column's elements in one thread's registers: past it the norm stays as written.)
from stitchcuda.agents.coder.emit_norm import COLUMN_ITEMS
from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    is_contiguous,
    iter_refs,
    python_number,
    ref,
    ref_name,
    rewrite_nodes,
)

OP = "sc_dim_norm"
# "0" leaves such a norm as written (its reductions and pointwise pass), for A/B runs.
DIM_NORM_ENV = "STITCHCUDA_DIM_NORM"


def fuse_dim_norms(graph: list[Node]) -> list[Node]:
    if os.environ.get(DIM_NORM_ENV, "1") == "0":
        return graph
    return rewrite_nodes(graph, _norm)


def _norm(node: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    found = _match(node, nodes, readers)
    if found is None:
        return None
    x, dim, eps, chain = found
    return [{
        "name": node["name"], "op": OP, "target": f"stitchcuda.{OP}", "view": False,
        "args": {"input": ref(x["name"]), "dim": dim, "eps": eps},
        "shape": list(x["shape"]), "stride": contiguous_strides(x["shape"]), "dtype": x["dtype"], "offset": 0,
        "folded": f"the norm over dim {dim} written as means, a deviation and a square root: one pass "
                  "holding each column's values",
    }], chain


def _match(y: Node, nodes: dict[str, Node], readers: dict[str, int]) -> tuple[Node, int, float, set[str]] | None:
    """(x, the dim, eps, the nodes the norm replaces besides y) where `y` is the end of the chain."""
    a = y.get("args", {})
    if y.get("target") == "aten.div.Tensor":
        dev, den = _node(a.get("self"), nodes), _node(a.get("other"), nodes)
        root = den if den is not None and den.get("target") == "aten.sqrt.default" else None
    elif y.get("target") == "aten.mul.Tensor":
        dev, den = _node(a.get("self"), nodes), _node(a.get("other"), nodes)
        if den is None or den.get("target") != "aten.rsqrt.default":
            dev, den = den, dev
        root = den if den is not None and den.get("target") == "aten.rsqrt.default" else None
    else:
        return None
    if dev is None or root is None:
        return None
    plus = _node(root["args"].get("self"), nodes)
    if plus is None or plus.get("target") != "aten.add.Tensor" or plus["args"].get("alpha", 1) != 1:
        return None
    eps = python_number(plus["args"].get("other"))
    var = _node(plus["args"].get("self"), nodes)
    if eps is None or eps < 0 or var is None:
        return None
    spread = _mean_over(var, nodes)
    if spread is None:
        return None
    sq, dim = spread
    square_of = _square_of(sq, nodes)
    if square_of is None:
        return None
    x_mu = _deviation(square_of, nodes)
    x_mu2 = _deviation(dev, nodes)
    if x_mu is None or x_mu2 is None or [n["name"] for n in x_mu] != [n["name"] for n in x_mu2]:
        return None
    x, mu = x_mu
    centre = _mean_over(mu, nodes)
    if centre is None or centre[0] is not x or centre[1] != dim:
        return None
    rank = len(x.get("shape") or [])
    if x.get("dtype") not in FLOAT_DTYPES or not is_contiguous(x) or x.get("offset", 0) or rank < 2 \
            or dim == rank - 1 or list(y.get("shape") or []) != list(x["shape"]) or y.get("dtype") != x["dtype"] \
            or x["shape"][dim] > COLUMN_ITEMS:
        return None
    chain = {mu["name"], var["name"], plus["name"], root["name"], sq["name"], square_of["name"], dev["name"]}
    # Each node of the chain read only inside it (y's readers are kept: the norm takes y's name).
    inside = {n: 0 for n in chain}
    for n in (y, *(nodes[c] for c in chain)):
        for src in _refs(n):
            if src in inside:
                inside[src] += 1
    if any(readers.get(n, 0) != inside[n] for n in chain):
        return None
    return x, dim, float(eps), chain


def _node(value: object, nodes: dict[str, Node]) -> Node | None:
    name = ref_name(value)
    return nodes.get(name) if name is not None else None


def _refs(node: Node) -> set[str]:
    """What `node` reads, each once (as graph.reader_counts counts readers)."""
    return set(iter_refs(node.get("args", {})))


def _mean_over(node: Node, nodes: dict[str, Node]) -> tuple[Node, int] | None:
    """(its operand, the dim) where `node` is a mean over one dim with keepdim."""
    a = node.get("args", {})
    if node.get("target") != "aten.mean.dim" or a.get("keepdim") is not True or a.get("dtype") is not None:
        return None
    dims, src = a.get("dim"), _node(a.get("self"), nodes)
    if src is None or not isinstance(dims, list) or len(dims) != 1 or type(dims[0]) is not int:
        return None
    rank = len(src.get("shape") or [])
    return (src, dims[0] % rank) if rank else None


def _square_of(node: Node, nodes: dict[str, Node]) -> Node | None:
    """d where `node` is d ** 2 (pow by 2, d * d, square)."""
    a, target = node.get("args", {}), node.get("target")
    if target == "aten.pow.Tensor_Scalar" and python_number(a.get("exponent")) == 2.0:
        return _node(a.get("self"), nodes)
    if target == "aten.mul.Tensor" and ref_name(a.get("self")) is not None and ref_name(a.get("self")) == ref_name(a.get("other")):
        return _node(a.get("self"), nodes)
    if target == "aten.square.default":
        return _node(a.get("self"), nodes)
    return None


def _deviation(node: Node, nodes: dict[str, Node]) -> tuple[Node, Node] | None:
    """(x, mu) where `node` is x - mu."""
    a = node.get("args", {})
    if node.get("target") != "aten.sub.Tensor" or a.get("alpha", 1) != 1:
        return None
    x, mu = _node(a.get("self"), nodes), _node(a.get("other"), nodes)
    if x is None or mu is None:
        return None
    return x, mu
