"""complex64 tensors as pairs of float32 (torch.view_as_real's layout: a trailing dimension of 2),
so that rotary embeddings written Meta-LLaMA's way (q viewed as complex, multiplied by `freqs_cis`
made with torch.polar, viewed back as real) plan with the emitters as they are.

Each complex node keeps its name and becomes its real pair: view_as_complex and view_as_real are
aliases; a logical view gets the trailing dimension (sizes, dims and permutations extended, strides
replayed on the pair's layout); mul, add, sub, neg, conj_physical, abs, real and imag are written
in the pairs' parts, a product as (ac - bd, ad + bc) put in the trailing dimension's two lanes by a where; a complex
parameter or buffer is read through torch.view_as_real (`as_real` on its input node: ModelNew keeps
the module's complex tensor and passes its real view). Anything else complex (a complex forward
argument, division, exp, FFTs) leaves the graph as traced, which the planner reports unsupported."""

from __future__ import annotations

from typing import Any

from stitchcuda.agents.graph import (
    LOGICAL_VIEWS,
    Node,
    by_name,
    contiguous_strides,
    new_node,
    ref,
    ref_name,
    replayed_view,
)
from stitchcuda.agents.graph import fresh_name as _fresh

COMPLEX = {"complex64": "float32"}


def rewrite_complex_as_pairs(graph: list[Node]) -> list[Node]:
    if not any(n.get("dtype") in COMPLEX for n in graph):
        return graph
    pairs = _Pairs(graph)
    out: list[Node] = []
    for node in graph:
        if node.get("dtype") in COMPLEX or any(pairs.is_complex(r) for r in _tensor_args(node)):
            got = pairs.rewrite(node)
            if got is None:
                return graph
            out.extend(got)
        else:
            out.append(node)
    return out


def _tensor_args(node: Node) -> list[str]:
    return [n for v in (node.get("args") or {}).values() if (n := ref_name(v)) is not None]


class _Pairs:
    def __init__(self, graph: list[Node]):
        self.traced = by_name(graph)
        self.done: dict[str, Node] = {}  # complex node -> its real pair
        self.taken = {n["name"] for n in graph}
        self.made: list[Node] = []
        self.lane: Node | None = None  # the constant [True, False]: which of a pair's lanes is the real part

    def is_complex(self, name: str) -> bool:
        return self.traced.get(name, {}).get("dtype") in COMPLEX

    def rewrite(self, node: Node) -> list[Node] | None:
        self.made = []
        op, dtype = node["op"], node.get("dtype")
        if op == "input":
            got = self._input(node)
        elif op == "view_as_complex":
            got = self._alias(node, self.traced.get(ref_name(node["args"].get("self")) or ""))
        elif op == "view_as_real":
            got = self._alias(node, self.done.get(ref_name(node["args"].get("self")) or ""))
        elif op in ("real", "imag"):
            src = self.done.get(ref_name(node["args"].get("self")) or "")
            got = None if src is None else self._part(node["name"], src, 0 if op == "real" else 1, keep=True)
        elif node.get("view") and dtype in COMPLEX:
            got = self._view(node)
        elif op in ("mul", "add", "sub") and dtype in COMPLEX:
            got = self._arith(node)
        elif op == "neg" and dtype in COMPLEX:
            got = self._unary(node, lambda src: self._op(node["name"], "neg", {"self": ref(src["name"])},
                                                        src["shape"], "aten.neg.default"))
        elif op in ("conj_physical", "_conj_physical") and dtype in COMPLEX:
            got = self._unary(node, self._conj_of(node))
        elif op == "abs" and dtype == "float32":
            got = self._abs(node)
        else:
            return None
        if got is None:
            return None
        if dtype in COMPLEX:
            self.done[node["name"]] = got
        return self.made

    # -- pieces

    def _op(self, name: str, op: str, args: dict[str, Any], shape: list[int], target: str) -> Node:
        made = new_node(name, op, args, shape, contiguous_strides(shape), "float32", view=False, target=target)
        self.made.append(made)
        return made

    def _fresh(self, base: str) -> str:
        return _fresh(self.taken, base)

    def _view_node(self, name: str, op: str, args: dict[str, Any], src: Node, shape: list[int],
                   target: str) -> Node | None:
        made = replayed_view(name, op, args, src, shape, target)
        if made is not None:
            self.made.append(made)
        return made

    def _input(self, node: Node) -> Node | None:
        if node.get("kind") not in ("param", "buffer") or node.get("dtype") not in COMPLEX or "shape" not in node:
            return None  # (a complex forward argument: the caller's tensor, not ours to view)
        made = {**node, "dtype": COMPLEX[node["dtype"]], "shape": [*node["shape"], 2],
                "stride": [s * 2 for s in node["stride"]] + [1], "offset": node.get("offset", 0) * 2,
                "as_real": {"dtype": node["dtype"], "shape": list(node["shape"])}}
        self.made.append(made)
        return made

    def _alias(self, node: Node, src: Node | None) -> Node | None:
        if src is None or src.get("dtype") != "float32" or not src.get("shape") or src["shape"][-1] != 2:
            return None
        made = {**node, "op": "alias", "target": "aten.alias.default", "args": {"self": ref(src["name"])},
                "view": True, "dtype": "float32", "shape": list(src["shape"]), "stride": list(src["stride"]),
                "offset": src.get("offset", 0)}
        self.made.append(made)
        return made

    def _view(self, node: Node) -> Node | None:
        target = node.get("target") or ""
        src = self.done.get(ref_name(node["args"].get("self")) or "")
        if target not in LOGICAL_VIEWS or src is None:
            return None
        rank_in, rank_out = len(src["shape"]) - 1, len(node["shape"])
        args = dict(node["args"])
        op = node["op"]

        def dim(d: int, rank: int) -> int:
            return d + rank if d < 0 else d

        if op in ("view", "_unsafe_view", "reshape"):
            args["size"] = [*args["size"], 2]
        elif op == "expand":
            args["size"] = [*args["size"], 2]
        elif op == "permute":
            args["dims"] = [dim(d, rank_in) for d in args["dims"]] + [rank_in]
        elif op == "t":
            op, target, args = "transpose", "aten.transpose.int", {"self": args["self"], "dim0": 0, "dim1": rank_in - 1}
        elif op == "transpose":
            args["dim0"], args["dim1"] = dim(args["dim0"], rank_in), dim(args["dim1"], rank_in)
        elif op == "unsqueeze":
            args["dim"] = dim(args["dim"], rank_out)
        elif op in ("slice", "select"):
            args["dim"] = dim(args.get("dim", 0), rank_in)
        elif op == "squeeze" and "dim" in args:
            dims = args["dim"] if isinstance(args["dim"], list) else [args["dim"]]
            args["dim"] = [dim(d, rank_in) for d in dims] if isinstance(args["dim"], list) else dim(dims[0], rank_in)
        elif op not in ("alias", "squeeze"):
            return None
        args["self"] = ref(src["name"])
        return self._view_node(node["name"], op, args, src, [*node["shape"], 2], target)

    def _part(self, name: str, src: Node, index: int, keep: bool = False) -> Node | None:
        """The real (0) or imaginary (1) part of pair `src`, a view."""
        made = self._view_node(name if keep else self._fresh(f"{src['name']}_{'ri'[index]}"), "select",
                               {"self": ref(src["name"]), "dim": len(src["shape"]) - 1, "index": index}, src,
                               list(src["shape"][:-1]), "aten.select.int")
        if made is not None and keep:
            made["dtype"] = "float32"
        return made

    def _stack(self, name: str, re: Node, im: Node) -> Node:
        """(re, im) along a new trailing dimension: the pair, as where(lane is 0, re, im) with both
        broadcast along it, so one pointwise kernel computes it (a cat would store re and im first)."""
        shape = list(re["shape"])
        if self.lane is None:
            self.lane = {"name": self._fresh("complex_real_lane"), "op": "constant", "shape": [2], "stride": [1],
                         "offset": 0, "dtype": "bool", "value": [True, False]}
            self.made.append(self.lane)
        parts = []
        for part in (re, im):
            u = self._view_node(self._fresh(f"{part['name']}_u"), "unsqueeze", {"self": ref(part["name"]),
                                "dim": len(shape)}, part, [*shape, 1], "aten.unsqueeze.default")
            assert u is not None  # (an unsqueeze of a contiguous tensor always is one)
            parts.append(ref(u["name"]))
        return self._op(name, "where", {"condition": ref(self.lane["name"]), "self": parts[0], "other": parts[1]},
                        [*shape, 2], "aten.where.self")

    def _binary(self, name: str, op: str, a: Node, b: Node, shape: list[int]) -> Node:
        return self._op(self._fresh(name), op, {"self": ref(a["name"]), "other": ref(b["name"])}, shape,
                        f"aten.{op}.Tensor")

    def _arith(self, node: Node) -> Node | None:
        a_name, b_raw = ref_name(node["args"].get("self")), node["args"].get("other")
        b_name = ref_name(b_raw)
        a = self.done.get(a_name or "")
        if a is None or node["args"].get("alpha") not in (None, 1):
            return None
        out = [*node["shape"], 2]
        b = self.done.get(b_name or "")
        if b is not None and node["op"] in ("add", "sub"):
            return self._op(node["name"], node["op"], {"self": ref(a["name"]), "other": ref(b["name"])}, out,
                            f"aten.{node['op']}.Tensor")
        if b is not None:  # (a product of complex numbers)
            ar, ai, br, bi = self._part("", a, 0), self._part("", a, 1), self._part("", b, 0), self._part("", b, 1)
            if None in (ar, ai, br, bi):
                return None
            parts = node["shape"]
            base = node["name"]
            re = self._binary(f"{base}_re", "sub", self._binary(f"{base}_rr", "mul", ar, br, parts),
                              self._binary(f"{base}_ii", "mul", ai, bi, parts), parts)
            im = self._binary(f"{base}_im", "add", self._binary(f"{base}_ri", "mul", ar, bi, parts),
                              self._binary(f"{base}_ir", "mul", ai, br, parts), parts)
            return self._stack(node["name"], re, im)
        if node["op"] != "mul":
            return None  # (complex plus a real: only the real part moves; not written here)
        if isinstance(b_raw, bool | int | float):
            return self._op(node["name"], "mul", {"self": ref(a["name"]), "other": b_raw}, out, "aten.mul.Tensor")
        real = self.traced.get(b_name or "")
        if real is None or real.get("dtype") != "float32" or real.get("shape") is None:
            return None
        u = self._view_node(self._fresh(f"{real['name']}_u"), "unsqueeze",
                            {"self": ref(real["name"]), "dim": len(real["shape"])}, real, [*real["shape"], 1],
                            "aten.unsqueeze.default")
        if u is None:
            return None
        return self._op(node["name"], "mul", {"self": ref(a["name"]), "other": ref(u["name"])}, out, "aten.mul.Tensor")

    def _unary(self, node: Node, make: Any) -> Node | None:
        src = self.done.get(ref_name(node["args"].get("self")) or "")
        return None if src is None else make(src)

    def _conj_of(self, node: Node) -> Any:
        def make(src: Node) -> Node | None:
            re, im = self._part("", src, 0), self._part("", src, 1)
            if re is None or im is None:
                return None
            neg = self._op(self._fresh(f"{node['name']}_negim"), "neg", {"self": ref(im["name"])}, list(im["shape"]),
                           "aten.neg.default")
            return self._stack(node["name"], re, neg)
        return make

    def _abs(self, node: Node) -> Node | None:
        src = self.done.get(ref_name(node["args"].get("self")) or "")
        if src is None:
            return None
        re, im = self._part("", src, 0), self._part("", src, 1)
        if re is None or im is None:
            return None
        return self._op(node["name"], "hypot", {"self": ref(re["name"]), "other": ref(im["name"])},
                        list(node["shape"]), "aten.hypot.default")
