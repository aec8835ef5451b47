"""A sum or mean over spatial dims of a convolution's result, computed from the input's sums.

A convolution is linear, so summing its result over a spatial dim sums, for each tap t, the input
over the positions that tap reaches: a contiguous range R(t) of input positions (a transposed
convolution's at any stride, a plain one's at stride 1). Where the range is all positions but a few
at the ends (padding crops a tap's reach there), R(t) = all - E(t), and over several reduced dims
the product of such differences expands by inclusion and exclusion into a main term, the input
summed over the reduced dims against the weights summed over their taps, less a few terms made of
the excluded border slices. Each term is a convolution over the dims that are kept (a matrix product
where none are), so a 3-d transposed convolution averaged over depth becomes a few 2-d ones over a
depth-summed input, and a global average pool of one becomes a matrix product.

Scalar scales between the convolution and the reduction move after it. The convolution's bias adds
its value once per position summed (once for a mean). Only where each tap excludes at most a few
positions and the terms stay few; the last node keeps the reduction's name. Found while reading level
2's transposed-convolution problems that average their result, 2026-11-28."""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    is_contiguous,
    new_node,
    numel,
    python_number,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh
from stitchcuda.agents.plan.linear_reductions import REDUCTION_TARGETS

MAX_EXCLUDED = 4  # border positions a tap may miss in one dim
MAX_TERMS = 16


def fold_conv_reductions(graph: list[Node]) -> list[Node]:
    return rewrite_nodes(graph, _fold)


def _fold(red: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    kind = red["op"]
    if kind not in REDUCTION_TARGETS or red.get("target") != REDUCTION_TARGETS[kind]:
        return None
    args = red.get("args", {})
    if args.get("dtype") is not None or not args.get("dim") or red.get("shape") is None:
        return None
    chain: list[Node] = []
    cur = nodes.get(ref_name(args.get("self")) or "")
    while cur is not None and cur["op"] in ("mul", "div", "neg"):
        if readers.get(cur["name"], 0) != 1 or (cur["op"] != "neg" and python_number(cur["args"].get("other")) is None):
            return None
        chain.append(cur)
        cur = nodes.get(ref_name(cur["args"].get("self")) or "")
    conv = cur
    if conv is None or conv["op"] != "convolution" or readers.get(conv["name"], 0) != 1 or not is_contiguous(conv):
        return None
    c = conv["args"]
    x = nodes.get(ref_name(c.get("input")) or "")
    w = nodes.get(ref_name(c.get("weight")) or "")
    bias = nodes.get(ref_name(c.get("bias")) or "") if c.get("bias") is not None else None
    if x is None or w is None or conv.get("dtype") not in FLOAT_DTYPES or x.get("dtype") != conv["dtype"] \
            or w.get("dtype") != conv["dtype"] or not x.get("shape") or not w.get("shape"):
        return None
    if c.get("bias") is not None and bias is None:
        return None
    rank = len(conv["shape"])
    nd = rank - 2
    dims = sorted({d % rank for d in args["dim"]})
    if not dims or any(d < 2 for d in dims) or len(x["shape"]) != rank:
        return None
    transposed = bool(c.get("transposed"))
    stride, padding, dilation = (list(c.get(k) or [1] * nd) for k in ("stride", "padding", "dilation"))
    out_pad = list(c.get("output_padding") or [0] * nd)
    groups = int(c.get("groups", 1))
    if any(len(v) != nd for v in (stride, padding, dilation, out_pad)):
        return None
    excluded: dict[int, list[set[int]]] = {}  # reduced dim -> per tap, the input positions it misses
    for d in dims:
        j = d - 2
        size_in, size_out, taps = x["shape"][d], conv["shape"][d], w["shape"][d]
        if not transposed and stride[j] != 1:
            return None  # a strided tap's reach is every s-th position, not a range
        per_tap = []
        for t in range(taps):
            lo, hi = _reach(transposed, size_in, size_out, stride[j], padding[j], dilation[j], t)
            miss = set(range(0, min(lo, size_in))) | set(range(max(hi + 1, 0), size_in))
            if len(miss) > MAX_EXCLUDED:
                return None
            per_tap.append(miss)
        excluded[d] = per_tap
    kept = [d for d in range(2, rank) if d not in dims]
    if not kept and groups != 1:
        return None
    terms = _terms(dims, excluded)
    if terms is None:
        return None
    return _build(red, kind, conv, chain, x, w, bias, dims, kept, terms, excluded, transposed, stride, padding,
                  dilation, out_pad, groups, taken)


def _reach(transposed: bool, size_in: int, size_out: int, s: int, p: int, dil: int, t: int) -> tuple[int, int]:
    """The input positions tap t carries into the kept output positions [0, size_out): [lo, hi]."""
    if transposed:  # output o = s*i - p + dil*t
        lo = -((dil * t - p) // s)  # ceil((p - dil*t) / s)
        hi = (size_out - 1 + p - dil * t) // s
    else:  # input i = o - p + dil*t (stride 1)
        lo, hi = dil * t - p, dil * t - p + size_out - 1
    return max(lo, 0), min(hi, size_in - 1)


def _terms(dims: list[int], excluded: dict[int, list[set[int]]]) -> list[tuple[int, dict[int, int]]] | None:
    """(sign, {dim: the excluded position selected}) for every inclusion-exclusion term; the empty
    selection is the main term."""
    terms: list[tuple[int, dict[int, int]]] = []
    for size in range(len(dims) + 1):
        for subset in itertools.combinations(dims, size):
            choices = [sorted(set().union(*excluded[d])) for d in subset]
            for picked in itertools.product(*choices):
                terms.append(((-1) ** size, dict(zip(subset, picked, strict=True))))
    return terms if len(terms) <= MAX_TERMS else None


def _build(red: Node, kind: str, conv: Node, chain: list[Node], x: Node, w: Node, bias: Node | None,
           dims: list[int], kept: list[int], terms: list[tuple[int, dict[int, int]]],
           excluded: dict[int, list[set[int]]], transposed: bool,
           stride: list[int], padding: list[int], dilation: list[int], out_pad: list[int], groups: int,
           taken: set[str]) -> tuple[list[Node], set[str]] | None:
    new: list[Node] = []
    dtype = conv["dtype"]
    base = red["name"]

    def add(op: str, args: dict[str, Any], shape: list[int], *, view: bool = False, stride_: list[int] | None = None,
            offset: int = 0, target: str | None = None) -> Node:
        node = new_node(_fresh(taken, f"{base}_{op}"), op, args, shape, stride_ or contiguous_strides(shape), dtype,
                        view=view, offset=offset, target=target)
        new.append(node)
        return node

    def select(src: Node, dim: int, index: int) -> Node:
        shape = src["shape"][:dim] + src["shape"][dim + 1:]
        strides = src["stride"][:dim] + src["stride"][dim + 1:]
        return add("select", {"self": ref(src["name"]), "dim": dim, "index": index}, shape, view=True,
                   stride_=strides, offset=src.get("offset", 0) + index * src["stride"][dim], target="aten.select.int")

    def total(src: Node, over: list[int]) -> Node:
        if not over:
            return src
        shape = [s for i, s in enumerate(src["shape"]) if i not in over]
        return add("sum", {"self": ref(src["name"]), "dim": over, "keepdim": False, "dtype": None}, shape,
                   target=REDUCTION_TARGETS["sum"])

    def combine(a: Node, b: Node, op: str) -> Node:
        return add(op, {"self": ref(a["name"]), "other": ref(b["name"]), "alpha": 1}, list(a["shape"]),
                   target=f"aten.{op}.Tensor")

    taps_of = {d: w["shape"][d] for d in dims}
    out: Node | None = None
    for sign, picked in terms:
        # The input: the picked border positions selected, the other reduced dims summed.
        y = x
        for d in sorted(picked, reverse=True):
            y = select(y, d, picked[d])
        rest = [d - sum(1 for p in picked if p < d) for d in dims if d not in picked]
        y = total(y, rest)
        # The weights: over each picked dim the taps that miss the picked position (some do: it was
        # picked from what they miss), over every other reduced dim all of them.
        wt = w
        for d in sorted(dims, reverse=True):
            if d not in picked:
                wt = total(wt, [d])
                continue
            slices = [select(wt, d, t) for t in range(taps_of[d]) if picked[d] in excluded[d][t]]
            wt = functools.reduce(lambda a, b: combine(a, b, "add"), slices)
        term = _product(y, wt, kept, transposed, stride, padding, dilation, out_pad, groups, conv, add)
        out = term if out is None else combine(out, term, "add" if sign > 0 else "sub")
    if out is None:
        return None
    count = math.prod(conv["shape"][d] for d in dims)
    if kind == "mean":
        out = add("div", {"self": ref(out["name"]), "other": float(count)}, list(out["shape"]), target="aten.div.Tensor")
    if bias is not None:
        per = [bias["shape"][0]] + [1] * len(kept)
        b = add("view", {"self": ref(bias["name"]), "size": per}, per, view=True)
        if kind == "sum":
            b = add("mul", {"self": ref(b["name"]), "other": float(count)}, per, target="aten.mul.Tensor")
        out = combine(out, b, "add")
    for op in reversed(chain):
        a = {k: v for k, v in op["args"].items() if k != "self"}
        out = add(op["op"], {"self": ref(out["name"]), **a}, list(out["shape"]), target=op.get("target"))
    shape = list(red["shape"])
    if numel(shape) != numel(out["shape"]):
        return None
    final = new_node(red["name"], "view", {"self": ref(out["name"]), "size": shape}, shape, contiguous_strides(shape),
                     dtype, view=True)
    final["folded"] = (f"{kind} over dims {dims} of convolution {conv['name']} computed from its input's sums "
                       f"({len(terms)} term(s): {'matrix products' if not kept else 'convolutions over the kept dims'})")
    new.append(final)
    return new, {conv["name"], *(c["name"] for c in chain)}


def _product(y: Node, wt: Node, kept: list[int], transposed: bool, stride: list[int], padding: list[int],
             dilation: list[int], out_pad: list[int], groups: int, conv: Node, add: Any) -> Node:
    """One term: the reduced input y against the reduced weights wt, as a convolution over the kept
    dims, or as a matrix product where no spatial dim is kept."""
    n = y["shape"][0]
    co = conv["shape"][1]
    if not kept:
        # y: [N, Cin]; wt: [Cin, Cout] (transposed) or [Cout, Cin]
        if transposed:
            mat2 = wt
        else:
            mat2 = add("t", {"self": ref(wt["name"])}, [wt["shape"][1], wt["shape"][0]], view=True,
                       stride_=[wt["stride"][1], wt["stride"][0]], offset=wt.get("offset", 0))
        return add("mm", {"self": ref(y["name"]), "mat2": ref(mat2["name"])}, [n, co])
    js = [d - 2 for d in kept]
    shape = [n, co] + [conv["shape"][d] for d in kept]
    return add("convolution", {
        "input": ref(y["name"]), "weight": ref(wt["name"]), "bias": None,
        "stride": [stride[j] for j in js], "padding": [padding[j] for j in js], "dilation": [dilation[j] for j in js],
        "transposed": transposed, "output_padding": [out_pad[j] for j in js], "groups": groups,
    }, shape)
