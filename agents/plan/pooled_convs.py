"""An average pool after a convolution, composed with it into one convolution.

Both are linear and shift-invariant, so averaging k neighbouring outputs of a convolution is itself a
convolution of the input, with every pool window's taps summed into one kernel:

- a plain convolution (stride 1, dilation 1; any padding and groups) of kernel K, then a pool of
  window k and stride s: one convolution of kernel K + k - 1 and stride s, its weights the original
  ones averaged over k shifted placements (zero-padded by k - 1 and average-pooled with stride 1);
- a transposed convolution of stride s (dilation 1) then a pool whose window and stride are s too:
  each pooled output sums, per input position near it, the taps that land in its window, so the pair
  is a stride-1 transposed convolution whose taps are windows of the original taps (zero-padded and
  average-pooled with stride s); where a pooled output would need input taps beyond the input's
  start (negative equivalent padding) it is left alone.

The full-size result is never written: level 2's 65 (a 3x3 convolution then a 4x4 pool) computed and
wrote a result 16x the size of what the pool kept. Pointwise steps between the convolution and the
pool that act alike on every position of a plane (a number, or a tensor of size 1 in every spatial
dim: a scalar or per-channel scale or shift) commute with the average and move after it. Composed
only where the composed convolution does no more multiply-adds than the pair's convolution; the
weights are composed in every forward (they may change between calls). A 1x1 convolution is left to
pool_first.py, which pools its input instead. Found while reading level 2's problems that pool a
convolution's result, 2026-11-29."""

from __future__ import annotations

import math
from typing import Any

from stitchcuda.agents.coder.emit_pool import unpadded_avg_window
from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    new_node,
    numel,
    python_number,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh
from stitchcuda.agents.plan.pool_first import AVG_POOLS

_COMMUTING = ("mul", "div", "add", "sub", "neg")


def compose_pools_into_convs(graph: list[Node]) -> list[Node]:
    return rewrite_nodes(graph, _composed)


def _composed(pool: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    nd = AVG_POOLS.get(pool["op"])
    if nd is None or not pool.get("shape"):
        return None
    args = pool.get("args", {})
    read = unpadded_avg_window(args, nd)
    if read is None:
        return None
    window, step = read
    pool_shape = list(pool["shape"])
    cur = nodes.get(ref_name(args.get("self")) or "")
    lifted = pool["op"] == "avg_pool2d" and cur is not None and _lifted_1d(cur, window, step, readers)
    if lifted:  # avg_pool1d as traced: a 2-d pool over an unsqueezed height of one
        nd, window, step, pool_shape = 1, window[1:], step[1:], pool_shape[:2] + pool_shape[3:]
        cur = nodes.get(ref_name(cur["args"].get("self")) or "")
    chain: list[Node] = []  # from the pool back to the convolution, the convolution excluded
    while cur is not None and cur["op"] in _COMMUTING:
        if readers.get(cur["name"], 0) != 1 or not _commutes(cur, nodes, nd):
            return None
        chain.append(cur)
        cur = nodes.get(ref_name(cur["args"].get("self")) or "")
    conv = cur
    if conv is None or conv["op"] != "convolution" or readers.get(conv["name"], 0) != 1 or not conv.get("shape"):
        return None
    c = conv["args"]
    x = nodes.get(ref_name(c.get("input")) or "")
    w = nodes.get(ref_name(c.get("weight")) or "")
    if x is None or w is None or not x.get("shape") or not w.get("shape") or len(conv["shape"]) != nd + 2:
        return None
    if conv.get("dtype") not in FLOAT_DTYPES or x.get("dtype") != conv["dtype"] or w.get("dtype") != conv["dtype"]:
        return None
    if any(n["shape"] != conv["shape"] for n in chain):
        return None  # a step that broadcasts the result wider does not move
    # The pool must keep whole windows only (a ceil-mode partial window averages fewer values).
    if any((size - k) // s + 1 != out for size, k, s, out in
           zip(conv["shape"][2:], window, step, pool_shape[2:], strict=True)):
        return None
    if any(v != 1 for v in c.get("dilation") or [1]):
        return None
    made = _transposed(pool_shape, conv, x, w, window, step, nd) if c.get("transposed") else \
        _plain(conv, x, w, window, step, nd)
    if made is None:
        return None
    pad, pooled, conv_args, taps_note = made
    shape = pool_shape
    # Taps per output value times outputs (the channels' factor is the same on both sides): the
    # composed convolution against the pair's, whose transposed convolution reaches an output from
    # 1/stride of its taps on average.
    before = numel(conv["shape"]) * math.prod(w["shape"][2:]) / (
        math.prod(c.get("stride") or [1]) if c.get("transposed") else 1)
    after = numel(shape) * math.prod(pooled[2:])
    if after > before:
        return None

    new: list[Node] = []
    dtype = conv["dtype"]
    base = pool["name"]

    def add(name: str, op: str, a: dict[str, Any], out_shape: list[int], target: str | None = None) -> Node:
        node = new_node(name, op, a, out_shape, contiguous_strides(out_shape), dtype, view=False, target=target)
        new.append(node)
        return node

    w_pad = add(_fresh(taken, f"{base}_taps_padded"), "constant_pad_nd",
                {"self": ref(w["name"]), "pad": pad, "value": 0.0}, [*w["shape"][:2], *_padded(w["shape"][2:], pad)])
    pool_op = f"avg_pool{nd}d"
    pool_args = {"self": ref(w_pad["name"]), "kernel_size": list(window), "stride": conv_args.pop("taps_step"),
                 "padding": [0] * nd, "ceil_mode": False, "count_include_pad": True}
    if nd > 1:
        pool_args["divisor_override"] = None
    w_new = add(_fresh(taken, f"{base}_taps"), pool_op, pool_args, pooled)
    # The last node keeps the pool's name, so every reader is unchanged.
    steps = [*reversed(chain), *([None] if lifted else [])]
    composed = add(base if not steps else _fresh(taken, f"{base}_conv"), "convolution",
                   {**c, "weight": ref(w_new["name"]), **conv_args}, shape, target=conv.get("target"))
    composed["folded"] = (f"the {pool_op} after convolution {conv['name']} composed into it ({taps_note}): "
                          "the full-size result is never made")
    out = composed
    for i, step_node in enumerate(steps):
        name = base if i == len(steps) - 1 else _fresh(taken, f"{base}_{step_node['op'] if step_node else 'view'}")
        if step_node is None:  # back to the lifted pool's shape
            out = add(name, "view", {"self": ref(out["name"]), "size": list(pool["shape"])}, list(pool["shape"]))
            out["view"] = True
            continue
        a = {k: v for k, v in step_node["args"].items() if k != "self"}
        out = add(name, step_node["op"], {"self": ref(out["name"]), **a}, shape, target=step_node.get("target"))
    return new, {conv["name"], *(n["name"] for n in chain), *([ref_name(args.get("self"))] if lifted else [])}


def _lifted_1d(node: Node, window: list[int], step: list[int], readers: dict[str, int]) -> bool:
    """Whether `node`, a 2-d pool's operand, is a 3-d tensor unsqueezed to a height of one that the
    pool leaves alone (window and stride 1 there): how avg_pool1d traces."""
    shape = node.get("shape") or []
    return (node["op"] == "unsqueeze" and len(shape) == 4 and shape[2] == 1 and readers.get(node["name"], 0) == 1
            and node["args"].get("dim") in (2, -2) and window[:1] == [1] and step[:1] == [1])


def _commutes(node: Node, nodes: dict[str, Node], nd: int) -> bool:
    """Whether `node` (a pointwise step on the convolution's result) acts alike on every position of a
    plane, so that averaging positions before or after it agree."""
    a = node.get("args", {})
    if node["op"] == "neg":
        return True
    if node["op"] in ("add", "sub") and python_number(a.get("alpha", 1)) is None:
        return False
    other = a.get("other")
    if python_number(other) is not None:
        return True
    o = nodes.get(ref_name(other) or "")
    if o is None or o.get("shape") is None or len(o["shape"]) > len(node["shape"]):
        return False
    if node["op"] in ("div", "add", "sub") and o.get("dtype") not in FLOAT_DTYPES:
        return False
    return all(s == 1 for s in ([1] * nd + list(o["shape"]))[-nd:])


def _plain(conv: Node, x: Node, w: Node, window: list[int], step: list[int], nd: int):
    """(weights' pad, composed weights' shape, the composed convolution's arguments, a note) for a
    plain convolution, or None."""
    c = conv["args"]
    if any(v != 1 for v in c.get("stride") or [1]) or all(k == 1 for k in w["shape"][2:]):
        return None
    pad: list[int] = []
    for k in reversed(window):  # constant_pad_nd lists the last dim first
        pad += [k - 1, k - 1]
    taps = [t + k - 1 for t, k in zip(w["shape"][2:], window, strict=True)]
    return pad, [*w["shape"][:2], *taps], {"stride": list(step), "taps_step": [1] * nd}, \
        f"kernel {'x'.join(map(str, taps))}, stride {'x'.join(map(str, step))}"


def _transposed(pool_shape: list[int], conv: Node, x: Node, w: Node, window: list[int], step: list[int], nd: int):
    """The same for a transposed convolution whose stride is the pool's window and stride, or None."""
    c = conv["args"]
    stride = list(c.get("stride") or [1] * nd)
    padding = list(c.get("padding") or [0] * nd)
    if len(stride) != nd or len(padding) != nd or stride != window or step != window:
        return None
    pad_lo: list[int] = []
    pad_hi: list[int] = []
    taps: list[int] = []
    new_padding: list[int] = []
    for j in range(nd):
        s, p, k, size = stride[j], padding[j], window[j], w["shape"][2 + j]
        # Pooled output q sums input q + i against the taps t with 0 <= s*i + t - p < k.
        i_hi = (p + k - 1) // s
        i_lo = -((size - 1 - p) // s)  # ceil((p - size + 1) / s)
        if i_lo > 0:
            return None
        if x["shape"][2 + j] - i_hi - i_lo != pool_shape[2 + j]:
            return None
        # Composed tap u (a stride-1 transposed convolution's, padding i_hi) is input offset
        # i = i_hi - u: the window of original taps starting at s*i_hi - p + s*u.
        pad_lo.append(s * i_hi - p)
        pad_hi.append(p - s * i_lo + k - size)
        taps.append(i_hi - i_lo + 1)
        new_padding.append(i_hi)
    pad: list[int] = []
    for j in reversed(range(nd)):
        pad += [pad_lo[j], pad_hi[j]]
    return pad, [*w["shape"][:2], *taps], {
        "stride": [1] * nd, "padding": new_padding, "output_padding": [0] * nd, "taps_step": list(stride)}, \
        f"a stride-1 transposed convolution of kernel {'x'.join(map(str, taps))}"


def _padded(sizes: list[int], pad: list[int]) -> list[int]:
    out = list(sizes)
    for k in range(len(pad) // 2):
        out[len(out) - 1 - k] += pad[2 * k] + pad[2 * k + 1]
    return out
