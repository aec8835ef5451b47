"""A linear layer over a concatenation of gathered rows, projected before the gather.

Message passing writes `Linear(cat([h[row], h[col], e]))`: every edge gathers its two nodes' features
and the layer multiplies E gathered rows, though they are copies of the M rows of `h`. The product
is linear in each block of the concatenation, so

    cat([T[i], R]) @ W.T + b  ==  (T @ W_T.T)[i] + R @ W_R.T + b

with W_T the weight's columns that meet T's features: T's rows are projected once (an M-row GEMM),
then the projected rows are gathered and summed (a pointwise kernel reads them, as it would have read
T's). The GEMM over the E gathered rows shrinks to the blocks that are not gathered; the E x K
concatenation is never written. Only where a gather repeats rows (E at least GATHER_RATIO x M, the
table's rows), so the M-row GEMM is the smaller, and where the layer's outputs are no wider than
the gathered rows, so the gathers move no more bytes than before.

Found on bench/networks2's EGNN layer (2026-12-04): a 63,488 x 261 concatenation of gathered node
features, written and read again by a GEMM, about 200 us of its 470. The sum's order differs from
the concatenated product's (fp32 rounding, within the products' tolerance).

The last node keeps the GEMM's name, so every reader is unchanged."""

from __future__ import annotations

import os
from typing import Any

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    is_contiguous,
    new_node,
    python_number,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh

# Off unless "1". Measured on the H200 at 227dc86 (bench/results/2026-12-04-h200-l2-full-gathers-ab-227dc86.md),
# it bought nothing yet: the projected rows are gathered by kernels of their own, as the table's rows
# were, and the sum's other rounding order put EGNN's TF32 candidate past the fp64 referee's
# per-element allowance on one set (8 of 262,144 elements), so it ran at 3xTF32: 0.473 ms on,
# 0.460 off; PNA 0.088 and 0.090 on the same rung. It waits on the gathers fused into their reader.
PROJECT_GATHERS_ENV = "STITCHCUDA_PROJECT_GATHERS"
# Gathered rows per table row at which projecting the table first is the smaller product.
GATHER_RATIO = 2


def project_gathered_linears(graph: list[Node]) -> list[Node]:
    if os.environ.get(PROJECT_GATHERS_ENV, "0") != "1":
        return graph
    return rewrite_nodes(graph, _rewrite)


def _gathered_table(part: Node, nodes: dict[str, Node], rows: int, width: int) -> tuple[Node, str] | None:
    """(the table, the index) where `part` is `table[index]`: one 1-D integer index of `rows` entries
    into a 2-D float table with at most rows / GATHER_RATIO rows, and rows at least `width` (the
    product's output features) wide: a projected row gathered is then no more to move than the row
    itself (16 features projected to 512 would gather 32 times the bytes)."""
    if part["op"] != "index" or part.get("target") not in (None, "aten.index.Tensor"):
        return None
    indices = part["args"].get("indices")
    if not isinstance(indices, list) or len(indices) != 1 or ref_name(indices[0]) is None:
        return None
    table, index = nodes.get(ref_name(part["args"].get("self")) or ""), nodes.get(ref_name(indices[0]) or "")
    if table is None or index is None or index.get("dtype") not in ("int64", "int32"):
        return None
    if len(table.get("shape") or []) != 2 or list(index.get("shape") or []) != [rows]:
        return None
    if table.get("dtype") != part.get("dtype") or not is_contiguous(table):
        return None
    return (table, index["name"]) if table["shape"][0] * GATHER_RATIO <= rows and table["shape"][1] >= width else None


def _rewrite(node: Node, nodes: dict[str, Node], readers: dict[str, int],
             taken: set[str]) -> tuple[list[Node], set[str]] | None:
    op, args = node["op"], node.get("args", {})
    if op == "addmm":
        if python_number(args.get("beta", 1)) != 1 or python_number(args.get("alpha", 1)) != 1:
            return None
        lhs, bias = ref_name(args.get("mat1")), ref_name(args.get("self"))
    elif op == "mm":
        lhs, bias = ref_name(args.get("self")), None
    else:
        return None
    cat, w = nodes.get(lhs or ""), nodes.get(ref_name(args.get("mat2")) or "")
    dtype = node.get("dtype")
    if cat is None or w is None or cat["op"] != "cat" or readers.get(cat["name"], 0) != 1 or dtype not in FLOAT_DTYPES:
        return None
    if op == "addmm" and (bias is None or bias not in nodes):
        return None
    shape = node.get("shape") or []
    if len(shape) != 2 or len(cat.get("shape") or []) != 2 or len(w.get("shape") or []) != 2 or w.get("dtype") != dtype:
        return None
    if cat["args"].get("dim", 0) % 2 != 1:
        return None
    parts = [nodes.get(ref_name(t) or "") for t in cat["args"].get("tensors", [])]
    # (Every part of the GEMM's dtype: cat promotes mixed ones, and a product of an fp16 table with an
    # fp32 weight slice is no form the GEMM emitter takes; the planner's fallback would drop every rewrite.)
    if not parts or any(p is None or len(p.get("shape") or []) != 2 or p.get("dtype") != dtype for p in parts):
        return None
    rows, n = shape
    gathered = [_gathered_table(p, nodes, rows, n) for p in parts]
    if not any(gathered):
        return None
    new: list[Node] = []
    base = node["name"]

    def fresh(suffix: str) -> str:
        return _fresh(taken, f"{base}_{suffix}")

    def weight_rows(start: int, count: int) -> str:
        """mat2's rows start .. start + count (the features one block meets): a view."""
        stride, offset = list(w["stride"]), int(w.get("offset") or 0)
        name = fresh("w")
        new.append(new_node(name, "slice", {"self": ref(w["name"]), "dim": 0, "start": start, "end": start + count,
                                            "step": 1}, [count, n], stride, dtype, view=True,
                            offset=offset + start * stride[0], target="aten.slice.Tensor"))
        return name

    def product(lhs_name: str, rows_: int, w_name: str, with_bias: bool) -> str:
        name = fresh("mm")
        gemm_args: dict[str, Any] = ({"self": ref(bias), "mat1": ref(lhs_name), "mat2": ref(w_name), "beta": 1,
                                      "alpha": 1} if with_bias else {"self": ref(lhs_name), "mat2": ref(w_name)})
        new.append(new_node(name, "addmm" if with_bias else "mm", gemm_args, [rows_, n], contiguous_strides([rows_, n]),
                            dtype, view=False))
        return name

    terms: list[str] = []
    bias_used = bias is None
    # The blocks that are not gathered, in runs of adjacent features: one product a run (its parts
    # concatenated again where there are several), the bias added by the first.
    runs: list[list[tuple[Node, int]]] = []
    offset = 0
    for part, g in zip(parts, gathered, strict=True):
        if g is None:
            if runs and runs[-1][-1][1] + runs[-1][-1][0]["shape"][1] == offset:
                runs[-1].append((part, offset))
            else:
                runs.append([(part, offset)])
        offset += part["shape"][1]
    if offset != w["shape"][0]:
        return None
    for run in runs:
        width = sum(p["shape"][1] for p, _ in run)
        if len(run) == 1:
            lhs_name = run[0][0]["name"]
        else:
            lhs_name = fresh("cat")
            new.append(new_node(lhs_name, "cat", {"tensors": [ref(p["name"]) for p, _ in run], "dim": 1},
                                [rows, width], contiguous_strides([rows, width]), dtype, view=False,
                                target="aten.cat.default"))
        terms.append(product(lhs_name, rows, weight_rows(run[0][1], width), not bias_used))
        bias_used = True
    offset = 0
    for part, g in zip(parts, gathered, strict=True):
        if g is not None:
            table, index = g
            projected = product(table["name"], table["shape"][0], weight_rows(offset, part["shape"][1]), False)
            picked = fresh("gather")
            new.append(new_node(picked, "index", {"self": ref(projected), "indices": [ref(index)]}, [rows, n],
                                contiguous_strides([rows, n]), dtype, view=False, target="aten.index.Tensor"))
            terms.append(picked)
        offset += part["shape"][1]
    if not bias_used:
        terms.append(bias)  # type: ignore[arg-type]  (bias_used is False only where bias is a name)
    if len(terms) < 2:  # (one gathered block alone, no bias: a cat of one tensor; left as it is)
        return None
    acc = terms[0]
    for k, term in enumerate(terms[1:], start=1):
        last = k == len(terms) - 1
        name = base if last else fresh("sum")
        added = new_node(name, "add", {"self": ref(acc), "other": ref(term), "alpha": 1}, [rows, n],
                         contiguous_strides([rows, n]), dtype, view=False, target="aten.add.Tensor")
        if last:
            added["folded"] = (f"{base}: the gathered rows' blocks of its concatenated input projected before the gather "
                               f"({sum(1 for g in gathered if g)} of {len(parts)} blocks: an M-row product each)")
        new.append(added)
        acc = name
    dropped = {cat["name"]}
    dropped |= {p["name"] for p, g in zip(parts, gathered, strict=True) if g is not None and readers.get(p["name"], 0) == 1}
    return new, dropped
