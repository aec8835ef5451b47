"""Ops traced in forms the emitters do not know, rewritten into forms they do, with the same value:

- an in-place op on a fresh intermediate that nothing else reads (F.cosine_similarity's C++ body
  clamps its norms with clamp_min_ below functionalisation's reach): its out-of-place twin;
- log_sigmoid_forward (F.logsigmoid; its second result is a buffer for the backward pass):
  -softplus(-x), which is PyTorch's min(x, 0) - log1p(exp(-|x|)) in other words.

Each replacement keeps the name its readers use. Found by a sweep of user-style modules, 2026-11-29."""

from __future__ import annotations

from stitchcuda.agents.graph import Node, contiguous_strides, new_node, picks, ref, ref_name, rewrite_nodes
from stitchcuda.agents.graph import fresh_name as _fresh

# In-place ops whose out-of-place twin the pointwise table has (the twin's overload name is the same).
_IN_PLACE = ("clamp_min_", "clamp_max_", "clamp_", "relu_", "mul_", "div_", "add_", "sub_", "neg_", "abs_",
             "sqrt_", "exp_", "tanh_", "sigmoid_", "pow_", "masked_fill_")
_FRESH = ("input", "output")  # ops whose results are not fresh intermediates


def rewrite_aten_forms(graph: list[Node]) -> list[Node]:
    chosen = picks(graph)
    return rewrite_nodes(graph, lambda node, nodes, readers, taken: _out_of_place(node, nodes, readers)
                         or _log_sigmoid(node, nodes, readers, taken, chosen))


def _out_of_place(node: Node, nodes: dict[str, Node], readers: dict[str, int]) -> tuple[list[Node], set[str]] | None:
    if node["op"] not in _IN_PLACE:
        return None
    src = nodes.get(ref_name(node.get("args", {}).get("self")) or "")
    # A fresh intermediate read by this op alone: no view of it, no other reader sees the write.
    if src is None or src["op"] in _FRESH or src.get("view") or readers.get(src["name"], 0) != 1:
        return None
    op = node["op"][:-1]
    target = node.get("target") or ""
    return [{**node, "op": op, "target": target.replace(f"aten.{node['op']}.", f"aten.{op}.", 1)}], set()


def _log_sigmoid(node: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str],
                 chosen: dict[str, list[Node]]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "log_sigmoid_forward":
        return None
    x = nodes.get(ref_name(node.get("args", {}).get("self")) or "")
    gets = {n["args"].get("index"): n for n in chosen.get(node["name"], [])}
    if x is None or not x.get("shape") or 0 not in gets or any(readers.get(gets[i]["name"], 0) for i in gets if i != 0):
        return None  # the backward buffer read by something: leave the op (unsupported) as traced
    shape, dtype, base = list(x["shape"]), gets[0]["dtype"], node["name"]
    flipped, soft = _fresh(taken, f"{base}_neg"), _fresh(taken, f"{base}_softplus")

    def made(name: str, op: str, args: dict, target: str) -> Node:
        return new_node(name, op, args, shape, contiguous_strides(shape), dtype, view=False, target=target)

    return [
        made(flipped, "neg", {"self": ref(x["name"])}, "aten.neg.default"),
        made(soft, "softplus", {"self": ref(flipped), "beta": 1, "threshold": 20}, "aten.softplus.default"),
        made(gets[0]["name"], "neg", {"self": ref(soft)}, "aten.neg.default"),
    ], {n["name"] for n in gets.values()}
