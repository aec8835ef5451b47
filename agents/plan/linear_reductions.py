"""A sum, mean or average pool over a linear layer's output features, folded into the layer's weights.

Both are linear maps, so reducing the outputs of `x @ W + b` over groups of `k` features equals
`x @ W' + b'` with W's columns (and b) reduced over the same groups: a GEMM `k` times narrower, plus
one read of W to reduce it. The reduction of W happens in every forward, so a changed weight is
followed. Between the GEMM and the reduction, ops that are linear in the GEMM's result may stand
(a scalar scale, adding or subtracting a tensor, a negation, views that keep the feature dim last):
each moves to the other side of the reduction (sum(a + v) = sum(a) + sum(v), sum(a + c) = sum(a) +
k*c). Anything else (an activation, a second reader of a value in the chain) leaves the graph as it
is. Folded only where the roofline says the narrower GEMM and the weight's reduction beat the full
GEMM (a GEMV-sized batch would read W twice instead of once).

The last node keeps the reduction's name, so every reader is unchanged. Found while reading level 2's
GEMM problems, 2026-11-28: `x @ W.T / 2` summed over its features is a matrix-vector product."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stitchcuda.agents.coder.emit_pool import unpadded_avg_window
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
from stitchcuda.target import Target

# Views that leave the data contiguous and the feature dim last, so the reduced GEMM's result takes
# them as a plain view of its own shape.
_VIEWS = ("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "alias", "detach", "clone")
_SCALED = ("mul", "div")
_SHIFTED = ("add", "sub")
# The sum and mean overloads a reduction is read from and written as (conv_reductions reads them too).
REDUCTION_TARGETS = {"sum": "aten.sum.dim_IntList", "mean": "aten.mean.dim"}


@dataclass(frozen=True)
class _Reduction:
    source: str  # the reduced node
    k: int  # features per group (the last dim's size for a whole-dim sum or mean)
    kind: str  # "sum" or "mean"


def fold_linear_reductions(graph: list[Node], target: Target | None = None) -> list[Node]:
    def fold(node: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
        red = _reduction(node, nodes)
        return None if red is None else _fold(node, red, nodes, readers, taken, target)

    return rewrite_nodes(graph, fold)


def _reduction(node: Node, nodes: dict[str, Node]) -> _Reduction | None:
    """The reduction `node` makes over its operand's last dim, in groups of k features."""
    op, args = node["op"], node.get("args", {})
    src = nodes.get(ref_name(args.get("self")) or "")
    if src is None or not src.get("shape") or src.get("dtype") not in FLOAT_DTYPES or node.get("shape") is None:
        return None
    shape = src["shape"]
    rank, n = len(shape), shape[-1]
    if op in REDUCTION_TARGETS and node.get("target") == REDUCTION_TARGETS[op]:
        dims = args.get("dim")
        if not dims or args.get("dtype") is not None:
            return None
        dims = {d % rank for d in dims}
        if rank - 1 not in dims or any(shape[d] != 1 for d in dims - {rank - 1}):
            return None
        red = _Reduction(src["name"], n, op)
    elif op in ("avg_pool1d", "avg_pool2d", "avg_pool3d"):
        nd = int(op[-2])
        window = unpadded_avg_window(args, nd) if rank >= nd + 1 else None
        if window is None:
            return None
        kernel, stride = window
        # Every pooled dim but the last is an identity: a window of one, or a dim of one.
        pooled = shape[rank - nd:]
        if any(not (kern == 1 and (st == 1 or size == 1)) for kern, st, size in
               zip(kernel[:-1], stride[:-1], pooled[:-1], strict=True)):
            return None
        k = kernel[-1]
        if stride[-1] != k or n % k:
            return None
        red = _Reduction(src["name"], k, "mean")
    else:
        return None
    if numel(node["shape"]) * red.k != numel(shape):
        return None
    return red


def _fold(node: Node, red: _Reduction, nodes: dict[str, Node], readers: dict[str, int], taken: set[str],
          target: Target | None) -> tuple[list[Node], set[str]] | None:
    chain: list[Node] = []  # from the reduction's operand back to the GEMM, the GEMM excluded
    terms: dict[str, str | None] = {}  # chain node -> the tensor it adds or subtracts
    cur = nodes[red.source]
    n = cur["shape"][-1]
    while cur["op"] not in ("addmm", "mm"):
        if readers.get(cur["name"], 0) != 1 or cur.get("shape") is None or cur["shape"][-1] != n \
                or not is_contiguous(cur) or cur.get("dtype") != node["dtype"]:
            return None
        step = _chain_operand(cur, nodes, n)
        if step is None:
            return None
        chain.append(cur)
        terms[cur["name"]] = step[1]
        cur = nodes[step[0]]
    gemm = cur
    if readers.get(gemm["name"], 0) != 1 or not is_contiguous(gemm) or gemm.get("dtype") != node["dtype"]:
        return None
    args = gemm["args"]
    if gemm["op"] == "addmm" and (args.get("beta", 1) != 1 or args.get("alpha", 1) != 1):
        return None
    x = nodes.get(ref_name(args.get("mat1" if gemm["op"] == "addmm" else "self")) or "")
    wt = nodes.get(ref_name(args.get("mat2")) or "")
    bias = nodes.get(ref_name(args.get("self")) or "") if gemm["op"] == "addmm" else None
    if x is None or wt is None or (gemm["op"] == "addmm" and bias is None):
        return None
    batch, kdim = gemm["shape"][0], x["shape"][1]
    if not _pays(batch, kdim, n, red.k, node["dtype"], target):
        return None
    dtype, k, g = node["dtype"], red.k, n // red.k
    new: list[Node] = []

    def fresh(base: str) -> str:
        return _fresh(taken, f"{node['name']}_{base}")

    def reduce_last(src: Node, base: str) -> str:
        """src's last dim (of n) reduced in groups of k: a view and a sum or mean."""
        lead = src["shape"][:-1]
        grouped = [*lead, g, k]
        view = fresh(f"{base}_groups")
        new.append(new_node(view, "view", {"self": ref(src["name"]), "size": grouped}, grouped,
                            contiguous_strides(grouped), src["dtype"], view=True, offset=src.get("offset", 0)))
        out = fresh(base)
        shape = [*lead, g]
        new.append(new_node(out, red.kind, {"self": ref(view), "dim": [len(grouped) - 1], "keepdim": False, "dtype": None},
                            shape, contiguous_strides(shape), src["dtype"], view=False, target=REDUCTION_TARGETS[red.kind]))
        return out

    w = _reduced_weight(wt, nodes, red, g, k, fresh, new)
    if w is None:
        return None
    gemm_args: dict[str, Any] = {"self": ref(x["name"]), "mat2": ref(w)}
    if bias is not None:
        folded_bias = _reduced_term(bias, red, n, reduce_last, fresh, new)
        gemm_args = {"self": ref(folded_bias), "mat1": ref(x["name"]), "mat2": ref(w), "beta": 1, "alpha": 1}
    shape = [batch, g]
    cur_name = fresh(gemm["name"])
    new.append(new_node(cur_name, gemm["op"], gemm_args, shape, contiguous_strides(shape), dtype, view=False,
                        target=gemm.get("target")))
    for c in reversed(chain):
        shape = [*c["shape"][:-1], g]
        name = fresh(c["name"])
        if c["op"] in _VIEWS:
            new.append(new_node(name, "view", {"self": ref(cur_name), "size": shape}, shape,
                                contiguous_strides(shape), dtype, view=True))
        else:
            args = _replayed_args(c, cur_name, terms.get(c["name"]), nodes, red, n, reduce_last, fresh, new)
            new.append(new_node(name, c["op"], args, shape, contiguous_strides(shape), dtype, view=False,
                                target=c.get("target")))
        cur_name = name
    out_shape = list(node["shape"])
    new.append({**new_node(node["name"], "view", {"self": ref(cur_name), "size": out_shape}, out_shape,
                           contiguous_strides(out_shape), dtype, view=True),
                "folded": f"{red.kind} over groups of {k} of {gemm['name']}'s {n} output features folded into its "
                          "weights (reduced in every forward)"})
    return new, {gemm["name"], *(c["name"] for c in chain)}


def _chain_operand(cur: Node, nodes: dict[str, Node], n: int) -> tuple[str, str | None] | None:
    """(the operand of chain node `cur` that carries the GEMM's result, the tensor term it adds or
    subtracts if any), where `cur` is linear in that operand; None where it is not."""
    op, args = cur["op"], cur.get("args", {})
    src = ref_name(args.get("self"))
    if src is None or src not in nodes:
        return None
    if op in _VIEWS:
        if op == "clone" and args.get("memory_format") not in (None, "torch.contiguous_format"):
            return None
        return (src, None) if nodes[src].get("shape") and nodes[src]["shape"][-1] == n else None
    if op == "neg":
        return src, None
    if op in _SCALED:
        return (src, None) if python_number(args.get("other")) is not None else None
    if op not in _SHIFTED or python_number(args.get("alpha", 1)) is None:
        return None
    other = ref_name(args.get("other"))
    if other is None:
        return (src, None) if python_number(args.get("other")) is not None else None
    a, b = nodes[src], nodes.get(other)
    if b is None or a.get("shape") is None or b.get("shape") is None:
        return None
    # The chain is the operand shaped like the result; the other is a term that broadcasts into it.
    # For sub only `self` may be the chain (a term subtracted from it).
    if a["shape"] == cur["shape"] and _term_ok(b, cur["shape"], n):
        return src, other
    if op == "add" and args.get("alpha", 1) == 1 and b["shape"] == cur["shape"] and _term_ok(a, cur["shape"], n):
        return other, src
    return None


def _term_ok(term: Node, shape: list[int], n: int) -> bool:
    t = term["shape"]
    if len(t) > len(shape) or term.get("dtype") not in FLOAT_DTYPES:
        return False
    if t and t[-1] not in (n, 1):
        return False
    if t and t[-1] == n and not is_contiguous(term):
        return False
    return all(s in (1, want) for s, want in zip(t[::-1], shape[::-1], strict=False))


def _reduced_term(term: Node, red: _Reduction, n: int, reduce_last: Any, fresh: Any, new: list[Node]) -> str:
    """An added term's own reduction: grouped along its features where it has them; where it is
    constant along them, itself for a mean, k times itself for a sum."""
    t = term["shape"]
    if t and t[-1] == n:
        return reduce_last(term, term["name"].replace(".", "_"))
    if red.kind == "mean" or red.k == 1:
        return term["name"]
    name = fresh(f"{term['name'].replace('.', '_')}_times_k")
    new.append(new_node(name, "mul", {"self": ref(term["name"]), "other": red.k}, t, contiguous_strides(t),
                        term["dtype"], view=False, target="aten.mul.Tensor"))
    return name


def _reduced_weight(wt: Node, nodes: dict[str, Node], red: _Reduction, g: int, k: int, fresh: Any,
                    new: list[Node]) -> str | None:
    """W' (K x g): the GEMM's right operand (K x n) with its columns reduced in groups of k. Either
    a transposed view of a row-major (n x K) weight, as nn.Linear's is, or a row-major (K x n) one."""
    if wt.get("shape") is None or len(wt["shape"]) != 2 or wt.get("dtype") not in FLOAT_DTYPES:
        return None
    kdim, n = wt["shape"]
    root = nodes.get(ref_name(wt.get("args", {}).get("self")) or "") if wt.get("view") else None
    if root is not None and wt["op"] in ("t", "permute", "transpose") and root.get("shape") == [n, kdim] \
            and is_contiguous(root) and wt["stride"] == [1, kdim] and wt.get("offset", 0) == 0:
        grouped, dim, lead = [g, k, kdim], 1, [g, kdim]
        src = root
    elif is_contiguous(wt):
        grouped, dim, lead = [kdim, g, k], 2, [kdim, g]
        src = wt
    else:
        return None
    view = fresh("weight_groups")
    new.append(new_node(view, "view", {"self": ref(src["name"]), "size": grouped}, grouped, contiguous_strides(grouped),
                        src["dtype"], view=True))
    reduced = fresh("weight")
    new.append(new_node(reduced, red.kind, {"self": ref(view), "dim": [dim], "keepdim": False, "dtype": None}, lead,
                        contiguous_strides(lead), src["dtype"], view=False, target=REDUCTION_TARGETS[red.kind]))
    if src is wt:
        return reduced
    t = fresh("weight_t")
    new.append(new_node(t, "t", {"self": ref(reduced)}, [kdim, g], [1, kdim], src["dtype"], view=True))
    return t


def _pays(batch: int, kdim: int, n: int, k: int, dtype: str, target: Target | None) -> bool:
    """Whether the narrower GEMM plus the weight's reduction beat the full GEMM on the roofline (the
    GEMM at tensor-core peak, so folding is never credited with more than it can give)."""
    target = target or Target.current()
    size = 4 if dtype == "float32" else 2
    peak = target.tf32_flops if dtype == "float32" else target.fp16_flops
    bw = target.dram_bytes_per_s

    def gemm_s(cols: int) -> float:
        return max(2.0 * batch * kdim * cols / peak, size * (batch * kdim + kdim * cols + batch * cols) / bw)

    fold_s = size * (kdim * n + kdim * (n // k)) / bw + gemm_s(n // k)
    return fold_s < 0.8 * gemm_s(n)


def _replayed_args(c: Node, cur: str, term: str | None, nodes: dict[str, Node], red: _Reduction, n: int,
                   reduce_last: Any, fresh: Any, new: list[Node]) -> dict[str, Any]:
    """Chain node c's arguments on the reduced side: its chain operand the reduced value, a scalar
    shift k times itself in a sum, a tensor term reduced as the GEMM's result is."""
    args = dict(c.get("args", {}))
    if c["op"] in ("neg", *_SCALED):
        return {**args, "self": ref(cur)}
    if term is None:
        return {**args, "self": ref(cur), "other": args["other"] * (red.k if red.kind == "sum" else 1)}
    reduced = _reduced_term(nodes[term], red, n, reduce_last, fresh, new)
    if ref_name(args.get("self")) == term:  # add(term, chain)
        return {**args, "self": ref(reduced), "other": ref(cur)}
    return {**args, "self": ref(cur), "other": ref(reduced)}
