"""Ops traced in forms the emitters do not know, rewritten into forms they do, with the same value:

- an in-place op on a fresh intermediate that nothing else reads (F.cosine_similarity's C++ body
  clamps its norms with clamp_min_ below functionalisation's reach) or that only new tensors read
  before it (torch.quantile's ceil_ and lerp_, and its in-place views unsqueeze_, transpose_ and
  squeeze_), or on one piece of a fresh intermediate's split that nothing else reads (nn.LSTMCell's
  gates: sigmoid_ and tanh_ on the four chunks of one matrix): its out-of-place twin;
- log_sigmoid_forward (F.logsigmoid; its second result is a buffer for the backward pass):
  -softplus(-x), which is PyTorch's min(x, 0) - log1p(exp(-|x|)) in other words;
- a sum of booleans (a count: nn.CrossEntropyLoss(label_smoothing=...) counts the targets it does
  not ignore) whose every reader is float arithmetic with a float operand, over fewer than 2**24
  elements: the booleans cast to float32 and summed in float32, which counts exactly there and
  which the readers' type promotion would have made of the int64 count anyway;
- booleans cast to int64 and then, through logical views, to a float type, the int64 tensors read
  by nothing else (F.one_hot(i).float(), F.one_hot(i).permute(...).float(): Dice losses,
  Gumbel-softmax's hard sample): the first cast made to the float type, the same 0 and 1;
- empty_like then fill (or fill_), nothing else reading the empty tensor
  (F.binary_cross_entropy_with_logits writes its 1 - target so, and with it BCEWithLogitsLoss and
  the focal losses built on it; ATen's C++ scalar - tensor, in F.cosine_embedding_loss and
  F.hinge_embedding_loss, as empty_like, fill_, sub_): full_like;
- rrelu_with_noise outside training (nn.RReLU in eval): leaky_relu at the mean slope (lower +
  upper) / 2, as PyTorch computes it there, its unread noise buffer dropped;
- trace of a matrix (VICReg's and Barlow Twins' losses): the sum of its diagonal view;
- a count of booleans (or of their integer cast) over fewer than 2**24 elements read by anything
  (a masked loss's token count, a CRF's sequence lengths, torch.count_nonzero): the booleans cast to
  float32, summed in float32 (exact there) and cast to int64, the same integers; torch.any and
  torch.all: the largest and smallest of x != 0 as float32, then != 0;
- index_put with one index tensor (`canvas[:, idx] = feats`, `out.index_put_((i,), v, accumulate=True)`:
  PointPillars' scatter to a pseudo-image, a sparse accumulation): scatter along that dim (stored)
  or index_add (accumulated), the values expanded to the indexed shape; with one boolean mask of
  the tensor's shape and one value (`scores[mask] = -inf`): where(mask, value, x);
- dot and vdot of real vectors (spectral norm's sigma = u . Wv): the sum of their product;
- binary_cross_entropy (nn.BCELoss on probabilities): its pointwise terms, each log clamped at -100
  as PyTorch's, weighted, then the mean or sum;
- a running count: cumsum of booleans (or of their integer cast) along fewer than 2**24 elements,
  as HF's RoBERTa/XLM-R/BART make position ids from the non-padding mask: the booleans cast to
  float32, summed by the float scan (exact there) and cast to int64, the same integers;
- aminmax (a range for min-max scaling, a quantiser's observer): amin and amax, each result read;
- _trilinear in F.bilinear's form (nn.Bilinear: x1 [B, I], its weight [O, I, J], x2 [B, J]): one
  GEMM of x1 with the weight laid out [I, O * J], then the product with x2 summed over J;
- max_unpool2d (SegNet's and ENet's decoders): each value stored at its index in a zeroed plane, a
  scatter along the flattened plane;
- dist (torch.dist(a, b, p)): the p-norm of a - b over every element;
- renorm (a max-norm constraint, torch.renorm(x, p, dim, maxnorm)): each slice along `dim` scaled by
  maxnorm / (its p-norm + 1e-7) where that norm exceeds maxnorm, as ATen's renorm computes it.

Each replacement keeps the name its readers use. Found by a sweep of user-style modules, 2026-11-29."""

from __future__ import annotations

import math

from stitchcuda.agents.graph import (
    LOGICAL_VIEWS,
    Node,
    contiguous_strides,
    new_node,
    picks,
    readers_of,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh

# In-place ops whose out-of-place twin the pointwise table has (the twin's overload name is the same).
_IN_PLACE = ("clamp_min_", "clamp_max_", "clamp_", "relu_", "mul_", "div_", "add_", "sub_", "neg_", "abs_",
             "sqrt_", "exp_", "tanh_", "sigmoid_", "pow_", "masked_fill_", "ceil_", "floor_", "round_", "trunc_",
             "lerp_")
# In-place views (torch.quantile's C++ body reshapes its result so) and their out-of-place twins' targets.
_VIEWS_IN_PLACE = {"unsqueeze_": "aten.unsqueeze.default", "squeeze_": "aten.squeeze.dim",
                   "transpose_": "aten.transpose.int", "t_": "aten.t.default"}
_FRESH = ("input", "output")  # ops whose results are not fresh intermediates
# Ops whose results (picked by getitem views of the op's input) are disjoint pieces of it.
_SPLITS = ("split", "unsafe_split", "split_with_sizes", "unsafe_split_with_sizes", "chunk", "unbind")


def rewrite_aten_forms(graph: list[Node]) -> list[Node]:
    chosen = picks(graph)
    readers_all = readers_of(graph)
    casts = _bool_casts(graph, {n["name"]: n for n in graph}, readers_all)
    order = {n["name"]: i for i, n in enumerate(graph)}
    return rewrite_nodes(graph, lambda node, nodes, readers, taken: ([casts[node["name"]]], set()) if node["name"] in casts
                         else _out_of_place(node, nodes, readers, readers_all, order)
                         or _log_sigmoid(node, nodes, readers, taken, chosen) or _filled_empty(node, nodes, readers)
                         or _float_count(node, nodes, taken, readers_all) or _rrelu_eval(node, nodes, readers)
                         or _trace(node, nodes, taken) or _running_count(node, nodes, taken)
                         or _count(node, nodes, taken) or _any_all(node, nodes, taken)
                         or _index_put(node, nodes, taken) or _dot(node, nodes, taken)
                         or _binary_cross_entropy(node, nodes, taken) or _aminmax(node, nodes, chosen)
                         or _bilinear(node, nodes, taken) or _max_unpool(node, nodes, taken)
                         or _dist(node, nodes, taken) or _renorm(node, nodes, taken))


def _bool_casts(graph: list[Node], nodes: dict[str, Node], readers: dict[str, list[Node]]) -> dict[str, Node]:
    """Booleans cast to int64, then (through logical views: one_hot's permute) to a float type, each
    int64 tensor read once: the first cast made bool to that float type and the views float too; the
    last cast is then float to float. Returns the replacement of each node that changes."""
    out: dict[str, Node] = {}
    for node in graph:
        if node["op"] != "_to_copy" or node.get("dtype") not in _FLOATS or node.get("view"):
            continue
        chain: list[Node] = []
        cur = nodes.get(ref_name(node["args"].get("self")) or "")
        while cur is not None and cur.get("view") and cur.get("target") in LOGICAL_VIEWS \
                and cur.get("dtype") == "int64" and len(readers.get(cur["name"], [])) == 1:
            chain.append(cur)
            cur = nodes.get(ref_name(cur["args"].get("self")) or "")
        src = nodes.get(ref_name(cur["args"].get("self")) or "") if cur is not None and cur["op"] == "_to_copy" else None
        if cur is None or src is None or cur.get("dtype") != "int64" or src.get("dtype") != "bool" \
                or cur.get("view") or len(readers.get(cur["name"], [])) != 1:
            continue
        dtype = node["dtype"]
        out[cur["name"]] = {**cur, "args": {**cur["args"], "dtype": dtype}, "dtype": dtype}
        for v in chain:
            out[v["name"]] = {**v, "dtype": dtype}
    return out


# Float arithmetic whose result takes its float operand's type when the other is an int64 count.
_PROMOTING = ("add", "sub", "mul", "div", "rsub", "maximum", "minimum")
_FLOATS = ("float32", "float16", "bfloat16")


def _float_count(node: Node, nodes: dict[str, Node], taken: set[str],
                 readers_of: dict[str, list[Node]]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "sum" or node.get("dtype") != "int64" or node["args"].get("dtype") is not None:
        return None
    src = nodes.get(ref_name(node["args"].get("self")) or "")
    if src is None or src.get("dtype") != "bool" or src.get("shape") is None or math.prod(src["shape"]) >= 2**24:
        return None
    for r in readers_of.get(node["name"], []):
        refs = [v for v in r.get("args", {}).values() if isinstance(v, dict) and "ref" in v]
        others = [nodes.get(v["ref"]) for v in refs if v["ref"] != node["name"]]
        if r["op"] not in _PROMOTING or r.get("dtype") != "float32" or len(others) != 1 or others[0] is None \
                or others[0].get("dtype") != "float32":
            return None
    shape = list(src["shape"])
    cast = new_node(_fresh(taken, f"{node['name']}_f"), "_to_copy", {"self": ref(src["name"]), "dtype": "float32"},
                    shape, contiguous_strides(shape), "float32", view=False)
    return [cast, {**node, "args": {**node["args"], "self": ref(cast["name"])}, "dtype": "float32"}], set()


def _filled_empty(node: Node, nodes: dict[str, Node], readers: dict[str, int]) -> tuple[list[Node], set[str]] | None:
    if node["op"] not in ("fill", "fill_") or node.get("view"):  # (fill_: ATen's own scalar - tensor)
        return None
    src = nodes.get(ref_name(node.get("args", {}).get("self")) or "")
    if src is None or src["op"] != "empty_like" or src.get("view") or readers.get(src["name"], 0) != 1 \
            or list(src.get("shape") or []) != list(node.get("shape") or []):
        return None
    a = src["args"]
    args = {"self": a["self"], "fill_value": node["args"].get("value"),
            **{k: a.get(k) for k in ("dtype", "layout", "device", "pin_memory", "memory_format") if k in a}}
    return [{**node, "op": "full_like", "target": "aten.full_like.default", "args": args}], {src["name"]}


def _out_of_place(node: Node, nodes: dict[str, Node], readers: dict[str, int],
                  readers_of: dict[str, list[Node]], order: dict[str, int]) -> tuple[list[Node], set[str]] | None:
    if node["op"] not in _IN_PLACE and node["op"] not in _VIEWS_IN_PLACE:
        return None
    src = nodes.get(ref_name(node.get("args", {}).get("self")) or "")
    if src is None or src["op"] in _FRESH:
        return None
    # A fresh intermediate read by this op alone (no view of it: no other reader sees the write), or
    # also before it by ops whose results are new tensors (torch.quantile's sub, then its ceil_);
    # or one piece of a fresh intermediate's one split (the other pieces are elsewhere in it).
    others = [r for r in readers_of.get(src["name"], []) if r["name"] != node["name"]]
    if any(r.get("view") or order[r["name"]] > order[node["name"]] for r in others):
        return None
    piece = bool(src.get("view"))
    if piece and (others or not _split_piece(src, nodes, readers_of)):
        return None
    if node["op"] in _VIEWS_IN_PLACE:  # the same metadata, now a view of the unchanged tensor
        if piece:
            return None
        return [{**node, "op": node["op"][:-1], "target": _VIEWS_IN_PLACE[node["op"]], "view": True}], set()
    op = node["op"][:-1]
    target = node.get("target") or ""
    out = {**node, "op": op, "target": target.replace(f"aten.{node['op']}.", f"aten.{op}.", 1)}
    if piece:  # a new tensor, not the piece's strided place in the matrix
        out.update(stride=contiguous_strides(node["shape"]), offset=0, view=False)
    return [out], set()


def _split_piece(src: Node, nodes: dict[str, Node], readers_of: dict[str, list[Node]]) -> bool:
    """Whether view `src` is a getitem of one split of a fresh intermediate that nothing else reads
    whole: the split's pieces are disjoint, so writing one changes nothing another reader sees."""
    if src["op"] != "getitem":
        return False
    root = nodes.get(ref_name(src["args"].get("self")) or "")
    if root is None or root["op"] in _FRESH or root.get("view"):
        return False
    readers = readers_of.get(root["name"], [])
    splits = [r for r in readers if r["op"] in _SPLITS]
    return len(splits) == 1 and all(r["op"] in _SPLITS or (r["op"] == "getitem" and r.get("view")) for r in readers)


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


def _rrelu_eval(node: Node, nodes: dict[str, Node], readers: dict[str, int]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "rrelu_with_noise" or node["args"].get("training") is not False:
        return None
    a = node["args"]
    lower, upper = a.get("lower"), a.get("upper")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lower, upper)):
        return None
    noise = nodes.get(ref_name(a.get("noise")) or "")
    dropped = {noise["name"]} if noise is not None and noise["op"] == "empty_like" and readers.get(noise["name"]) == 1 \
        else set()
    return [{**node, "op": "leaky_relu", "target": "aten.leaky_relu.default",
             "args": {"self": a["self"], "negative_slope": (lower + upper) / 2}}], dropped


def _trace(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    x = nodes.get(ref_name(node["args"].get("self")) or "") if node["op"] == "trace" else None
    if x is None or len(x.get("shape") or []) != 2 or x.get("dtype") not in _FLOATS:
        return None
    n = min(x["shape"])
    diag = new_node(_fresh(taken, f"{node['name']}_diagonal"), "diagonal",
                    {"self": ref(x["name"]), "offset": 0, "dim1": 0, "dim2": 1}, [n],
                    [x["stride"][0] + x["stride"][1]], x["dtype"], view=True, offset=x.get("offset", 0))
    return [diag, {**node, "op": "sum", "target": "aten.sum.dim_IntList",
                   "args": {"self": ref(diag["name"]), "dim": [0], "keepdim": False}}], set()


def _running_count(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "cumsum" or node.get("dtype") != "int64" or node["args"].get("dtype") not in (None, "int64"):
        return None
    src = nodes.get(ref_name(node["args"].get("self")) or "")
    if src is not None and src["op"] == "_to_copy" and src.get("dtype") in ("int32", "int64") and not src.get("view"):
        src = nodes.get(ref_name(src["args"].get("self")) or "")  # (mask.int(): still 0 or 1)
    if src is None or src.get("dtype") != "bool" or not src.get("shape"):
        return None
    shape = list(src["shape"])
    if shape != list(node["shape"]) or shape[int(node["args"].get("dim", 0)) % len(shape)] >= 2**24:
        return None
    strides = contiguous_strides(shape)
    cast = new_node(_fresh(taken, f"{node['name']}_f"), "_to_copy", {"self": ref(src["name"]), "dtype": "float32"},
                    shape, strides, "float32", view=False)
    scan = new_node(_fresh(taken, f"{node['name']}_scan"), "cumsum",
                    {"self": ref(cast["name"]), "dim": node["args"].get("dim", 0), "dtype": None}, shape, strides,
                    "float32", view=False)
    return [cast, scan, new_node(node["name"], "_to_copy", {"self": ref(scan["name"]), "dtype": "int64"}, shape,
                                 strides, "int64", view=False)], set()


def _zero_one(node: Node | None, nodes: dict[str, Node]) -> Node | None:
    """The bool tensor whose values `node` holds as they are (itself, or casts of it: mask.long(),
    mask.float().long(), 0 and 1 in every numeric type)."""
    while node is not None and node["op"] == "_to_copy" and not node.get("view") \
            and node.get("dtype") in ("int32", "int64", *_FLOATS):
        node = nodes.get(ref_name(node["args"].get("self")) or "")
    return node if node is not None and node.get("dtype") == "bool" and node.get("shape") is not None else None


def _nonzero_as_float(x: Node, base: str, taken: set[str]) -> list[Node]:
    """[(x != 0) where x is not bool,] its 0/1 values as float32: the last node is the float."""
    shape = list(x["shape"])
    strides = contiguous_strides(shape)
    made, src = [], x
    if x.get("dtype") != "bool":
        src = new_node(_fresh(taken, f"{base}_nz"), "ne", {"self": ref(x["name"]), "other": 0}, shape, strides, "bool",
                       view=False, target="aten.ne.Scalar")
        made.append(src)
    made.append(new_node(_fresh(taken, f"{base}_f"), "_to_copy", {"self": ref(src["name"]), "dtype": "float32"},
                         shape, strides, "float32", view=False))
    return made


def _dim_list(dim: int | list[int] | None) -> list[int] | None:
    return [dim] if isinstance(dim, int) and not isinstance(dim, bool) else dim


def _reduced_elements(x: Node, dim: int | list[int] | None) -> int:
    shape = list(x["shape"])
    if dim is None or dim == []:
        return math.prod(shape)
    dims = [dim] if isinstance(dim, int) else list(dim)
    return math.prod(shape[d % max(len(shape), 1)] for d in dims) if shape else 1


def _count(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    op, a = node["op"], node.get("args", {})
    if op == "sum" and node.get("dtype") == "int64" and a.get("dtype") in (None, "int64"):
        x = _zero_one(nodes.get(ref_name(a.get("self")) or ""), nodes)
        made = _nonzero_as_float(x, node["name"], taken) if x is not None else []
    elif op == "count_nonzero" and node.get("dtype") == "int64":
        x = nodes.get(ref_name(a.get("self")) or "")
        made = _nonzero_as_float(x, node["name"], taken) if x is not None and x.get("shape") is not None else []
    else:
        return None
    if not made or node.get("shape") is None or _reduced_elements(x, a.get("dim")) >= 2**24:
        return None
    shape = list(node["shape"])
    strides = contiguous_strides(shape)
    keepdim = bool(a.get("keepdim", False))
    total = new_node(_fresh(taken, f"{node['name']}_sum"), "sum",
                     {"self": ref(made[-1]["name"]), "dim": _dim_list(a.get("dim")), "keepdim": keepdim, "dtype": None},
                     shape, strides, "float32", view=False, target="aten.sum.dim_IntList")
    return [*made, total, new_node(node["name"], "_to_copy", {"self": ref(total["name"]), "dtype": "int64"}, shape,
                                   strides, "int64", view=False)], set()


def _any_all(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] not in ("any", "all") or node.get("dtype") != "bool" or node.get("shape") is None:
        return None
    a = node.get("args", {})
    x = nodes.get(ref_name(a.get("self")) or "")
    if x is None or x.get("shape") is None or x.get("dtype") not in (*_FLOATS, "bool", "int64", "int32") \
            or _reduced_elements(x, a.get("dim")) == 0:  # (any of nothing is False; amax of nothing raises)
        return None
    shape = list(node["shape"])
    strides = contiguous_strides(shape)
    made = _nonzero_as_float(x, node["name"], taken)
    op = "amax" if node["op"] == "any" else "amin"
    dim = a.get("dim")
    red = new_node(_fresh(taken, f"{node['name']}_{op}"), op,
                   {"self": ref(made[-1]["name"]), "dim": _dim_list(dim) or [], "keepdim": bool(a.get("keepdim"))},
                   shape, strides, "float32", view=False)
    return [*made, red, new_node(node["name"], "ne", {"self": ref(red["name"]), "other": 0.0}, shape, strides, "bool",
                                 view=False, target="aten.ne.Scalar")], set()


def _broadcast_strides(src: Node, shape: list[int]) -> list[int] | None:
    """`src`'s strides seen as `shape` (expand's rule: dims aligned at the right, ones stretched)."""
    have, stride = list(src["shape"]), list(src["stride"])
    if len(have) > len(shape):
        return None
    have, stride = [1] * (len(shape) - len(have)) + have, [0] * (len(shape) - len(stride)) + stride
    out = []
    for h, st, n in zip(have, stride, shape, strict=True):
        if h == n:
            out.append(st if n != 1 else 0)
        elif h == 1:
            out.append(0)
        else:
            return None
    return out


def _expanded(src: Node, shape: list[int], base: str, taken: set[str]) -> list[Node] | None:
    """[] where `src` has `shape` already, else its expand to it (a view); None where it does not broadcast."""
    if list(src["shape"]) == shape:
        return []
    strides = _broadcast_strides(src, shape)
    if strides is None:
        return None
    return [new_node(_fresh(taken, f"{base}_wide"), "expand", {"self": ref(src["name"]), "size": shape, "implicit": False},
                     shape, strides, src["dtype"], view=True, offset=src.get("offset", 0))]


def _index_put(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] not in ("index_put", "_index_put_impl") or node.get("shape") is None:
        return None
    a = node["args"]
    x, values = nodes.get(ref_name(a.get("self")) or ""), nodes.get(ref_name(a.get("values")) or "")
    indices = a.get("indices") or []
    given = [(d, nodes.get(ref_name(i) or "")) for d, i in enumerate(indices) if i is not None]
    if x is None or values is None or values.get("shape") is None or len(given) != 1 or given[0][1] is None \
            or values.get("dtype") != x.get("dtype"):
        return None
    d, idx = given[0]
    shape, name = list(x["shape"]), node["name"]
    if idx.get("dtype") == "bool":  # x[mask] = value, the mask of x's own shape
        if d != 0 or list(idx["shape"]) != shape or math.prod(values["shape"]) != 1 or a.get("accumulate"):
            return None
        one = _expanded(values, [], name, taken) if values["shape"] else []
        if one is None:
            return None
        return [*one, {**node, "op": "where", "target": "aten.where.self",
                       "args": {"condition": ref(idx["name"]), "self": ref((one[-1] if one else values)["name"]),
                                "other": ref(x["name"])}}], set()
    if idx.get("dtype") != "int64" or len(idx.get("shape") or []) != 1 or idx.get("stride") != [1]:
        return None
    target = [*shape[:d], idx["shape"][0], *shape[d + 1:]]
    wide = _expanded(values, target, name, taken)
    if wide is None:
        return None
    src = (wide[-1] if wide else values)["name"]
    if a.get("accumulate"):
        return [*wide, {**node, "op": "index_add", "target": "aten.index_add.default",
                        "args": {"self": ref(x["name"]), "dim": d, "index": ref(idx["name"]), "source": ref(src),
                                 "alpha": 1}}], set()
    lined = [1] * len(shape)
    lined[d] = idx["shape"][0]
    line = new_node(_fresh(taken, f"{name}_at"), "view", {"self": ref(idx["name"]), "size": lined}, lined,
                    contiguous_strides(lined), idx["dtype"], view=True, offset=idx.get("offset", 0))
    spread = _expanded(line, target, f"{name}_at", taken)
    if spread is None:
        return None
    return [*wide, line, *spread, {**node, "op": "scatter", "target": "aten.scatter.src",
                                   "args": {"self": ref(x["name"]), "dim": d,
                                            "index": ref((spread[-1] if spread else line)["name"]),
                                            "src": ref(src)}}], set()


def _dot(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    # float32 only: a half-precision product would round (and overflow) each term, where cuBLAS
    # and the CPU's dot accumulate in float32.
    if node["op"] not in ("dot", "vdot") or node.get("dtype") != "float32":
        return None
    a, b = (nodes.get(ref_name(node["args"].get(k)) or "") for k in ("self", "tensor" if node["op"] == "dot" else "other"))
    if a is None or b is None or len(a.get("shape") or []) != 1 or a.get("shape") != b.get("shape"):
        return None
    n = a["shape"]
    prod = new_node(_fresh(taken, f"{node['name']}_prod"), "mul", {"self": ref(a["name"]), "other": ref(b["name"])},
                    n, [1], node["dtype"], view=False, target="aten.mul.Tensor")
    return [prod, {**node, "op": "sum", "target": "aten.sum.dim_IntList",
                   "args": {"self": ref(prod["name"]), "dim": [0], "keepdim": False, "dtype": None}}], set()


def _binary_cross_entropy(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "binary_cross_entropy" or node.get("dtype") != "float32":
        return None
    a = node["args"]
    p, t = nodes.get(ref_name(a.get("self")) or ""), nodes.get(ref_name(a.get("target")) or "")
    w = nodes.get(ref_name(a.get("weight")) or "") if a.get("weight") is not None else None
    reduction = a.get("reduction", 1)
    if p is None or t is None or p.get("shape") != t.get("shape") or reduction not in (0, 1, 2) \
            or (a.get("weight") is not None and w is None):
        return None
    shape, base = list(p["shape"]), node["name"]
    strides = contiguous_strides(shape)
    made: list[Node] = []

    def op(kind: str, args: dict, target: str, name: str | None = None) -> str:
        # (every term has the probabilities' shape; `name`: the unreduced loss keeps the op's own)
        made.append(new_node(name or _fresh(taken, f"{base}_{kind}"), kind, args, shape, strides, "float32",
                             view=False, target=target))
        return made[-1]["name"]

    log_p = op("clamp_min", {"self": ref(op("log", {"self": ref(p["name"])}, "aten.log.default")), "min": -100.0},
               "aten.clamp_min.default")
    # log(1 - p) as PyTorch's kernels compute it, log1p(-p): exact for a tiny p
    q = op("neg", {"self": ref(p["name"])}, "aten.neg.default")
    log_q = op("clamp_min", {"self": ref(op("log1p", {"self": ref(q)}, "aten.log1p.default")), "min": -100.0},
               "aten.clamp_min.default")
    # -(t * log p + (1 - t) * log(1 - p)) = (t - 1) * log(1 - p) - t * log p
    u = op("sub", {"self": ref(t["name"]), "other": 1.0, "alpha": 1}, "aten.sub.Scalar")
    term = op("sub", {"self": ref(op("mul", {"self": ref(u), "other": ref(log_q)}, "aten.mul.Tensor")),
                      "other": ref(op("mul", {"self": ref(t["name"]), "other": ref(log_p)}, "aten.mul.Tensor")),
                      "alpha": 1}, "aten.sub.Tensor", name=base if reduction == 0 and w is None else None)
    if w is not None:
        term = op("mul", {"self": ref(term), "other": ref(w["name"])}, "aten.mul.Tensor",
                  name=base if reduction == 0 else None)
    if reduction == 0:
        return made, set()
    made.append({**node, "op": "mean" if reduction == 1 else "sum",
                 "target": "aten.mean.dim" if reduction == 1 else "aten.sum.dim_IntList",
                 "args": {"self": ref(term), "dim": list(range(len(shape))), "keepdim": False, "dtype": None}})
    return made, set()


def _aminmax(node: Node, nodes: dict[str, Node], chosen: dict[str, list[Node]]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "aminmax" or ref_name(node["args"].get("self")) not in nodes:
        return None
    gets = chosen.get(node["name"], [])
    if not gets or any(g["args"].get("index") not in (0, 1) for g in gets):
        return None
    dim = node["args"].get("dim")
    dims = [] if dim is None else [dim]  # (amin and amax over [] take every dim)
    made = [{**g, "op": ("amin", "amax")[g["args"]["index"]], "target": f"aten.{('amin', 'amax')[g['args']['index']]}.default",
             "args": {"self": node["args"]["self"], "dim": dims, "keepdim": bool(node["args"].get("keepdim", False))},
             "view": False} for g in gets]
    return made, {g["name"] for g in gets}


def _bilinear(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "_trilinear" or node.get("dtype") not in _FLOATS:
        return None
    a = node["args"]
    x1, w, x2 = (nodes.get(ref_name(a.get(k)) or "") for k in ("i1", "i2", "i3"))
    form = (list(a.get("expand1") or []), list(a.get("expand2") or []), list(a.get("expand3") or []),
            list(a.get("sumdim") or []))
    if x1 is None or w is None or x2 is None or form != ([1, 3], [0], [1, 2], [2, 3]):
        return None
    if len(x1.get("shape") or []) != 2 or len(w.get("shape") or []) != 3 or len(x2.get("shape") or []) != 2:
        return None
    (b, i), (o, i_w, j), (b2, j2) = x1["shape"], w["shape"], x2["shape"]
    if (i, b, j) != (i_w, b2, j2) or not x1["dtype"] == w["dtype"] == x2["dtype"] == node["dtype"]:
        return None
    base, dtype = node["name"], node["dtype"]
    ws = w["stride"]

    def made(suffix: str, op: str, args: dict, shape: list[int], stride: list[int], target: str, *,
             view: bool = False, offset: int = 0) -> Node:
        return new_node(_fresh(taken, f"{base}_{suffix}"), op, args, shape, stride, dtype, view=view,
                        offset=offset, target=target)

    # The weight [O, I, J] as [I, O * J]: a permuted view, made contiguous, then flattened.
    perm = made("w_perm", "permute", {"self": ref(w["name"]), "dims": [1, 0, 2]}, [i, o, j], [ws[1], ws[0], ws[2]],
                "aten.permute.default", view=True, offset=w.get("offset", 0))
    packed = made("w_packed", "clone", {"self": ref(perm["name"]), "memory_format": "torch.contiguous_format"}, [i, o, j],
                  contiguous_strides([i, o, j]), "aten.clone.default")
    flat = made("w_flat", "view", {"self": ref(packed["name"]), "size": [i, o * j]}, [i, o * j], [o * j, 1],
                "aten.view.default", view=True)
    prod = made("x1w", "mm", {"self": ref(x1["name"]), "mat2": ref(flat["name"])}, [b, o * j], [o * j, 1],
                "aten.mm.default")
    per = made("x1w_oj", "view", {"self": ref(prod["name"]), "size": [b, o, j]}, [b, o, j], [o * j, j, 1],
               "aten.view.default", view=True)
    xs = x2["stride"]
    x2v = made("x2_b1j", "view", {"self": ref(x2["name"]), "size": [b, 1, j]}, [b, 1, j], [xs[0], xs[1], xs[1]],
               "aten.view.default", view=True, offset=x2.get("offset", 0))
    terms = made("terms", "mul", {"self": ref(per["name"]), "other": ref(x2v["name"])}, [b, o, j],
                 contiguous_strides([b, o, j]), "aten.mul.Tensor")
    return [perm, packed, flat, prod, per, x2v, terms,
            {**node, "op": "sum", "target": "aten.sum.dim_IntList",
             "args": {"self": ref(terms["name"]), "dim": [2], "keepdim": False, "dtype": None}}], set()


def _max_unpool(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "max_unpool2d" or node.get("dtype") not in _FLOATS or len(node.get("shape") or []) != 4:
        return None
    x, idx = (nodes.get(ref_name(node["args"].get(k)) or "") for k in ("self", "indices"))
    if x is None or idx is None or idx.get("dtype") != "int64" or x.get("shape") != idx.get("shape") \
            or len(x["shape"]) != 4:
        return None
    n, c, h, w = x["shape"]
    out_hw = node["shape"][2] * node["shape"][3]
    base, dtype = node["name"], node["dtype"]
    views = []
    for t, suffix in ((x, "values"), (idx, "indices")):
        if t["stride"] != contiguous_strides(t["shape"]):
            return None  # (a view of a strided tensor as rows would need a copy)
        views.append(new_node(_fresh(taken, f"{base}_{suffix}"), "view", {"self": ref(t["name"]), "size": [n, c, h * w]},
                              [n, c, h * w], [c * h * w, h * w, 1], t["dtype"], view=True,
                              offset=t.get("offset", 0), target="aten.view.default"))
    zeros = new_node(_fresh(taken, f"{base}_zeros"), "new_zeros",
                     {"self": ref(x["name"]), "size": [n, c, out_hw], "dtype": None, "layout": None, "device": None,
                      "pin_memory": None}, [n, c, out_hw], [c * out_hw, out_hw, 1], dtype, view=False)
    planes = new_node(_fresh(taken, f"{base}_planes"), "scatter",
                      {"self": ref(zeros["name"]), "dim": 2, "index": ref(views[1]["name"]), "src": ref(views[0]["name"])},
                      [n, c, out_hw], [c * out_hw, out_hw, 1], dtype, view=False, target="aten.scatter.src")
    return [*views, zeros, planes, {**node, "op": "view", "target": "aten.view.default", "view": True,
                                    "args": {"self": ref(planes["name"]), "size": list(node["shape"])}}], set()


def _dist(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "dist" or node.get("dtype") not in _FLOATS:
        return None
    a, b = (nodes.get(ref_name(node["args"].get(k)) or "") for k in ("self", "other"))
    p = node["args"].get("p", 2)
    if a is None or b is None or a.get("shape") is None or a.get("shape") != b.get("shape") \
            or not isinstance(p, int | float) or isinstance(p, bool):
        return None
    shape = list(a["shape"])
    diff = new_node(_fresh(taken, f"{node['name']}_diff"), "sub", {"self": ref(a["name"]), "other": ref(b["name"]), "alpha": 1},
                    shape, contiguous_strides(shape), node["dtype"], view=False, target="aten.sub.Tensor")
    return [diff, {**node, "op": "linalg_vector_norm", "target": "aten.linalg_vector_norm.default",
                   "args": {"self": ref(diff["name"]), "ord": p, "dim": None, "keepdim": False, "dtype": None}}], set()


def _renorm(node: Node, nodes: dict[str, Node], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    if node["op"] != "renorm" or node.get("dtype") not in _FLOATS:
        return None
    a = node["args"]
    x = nodes.get(ref_name(a.get("self")) or "")
    p, dim, maxnorm = a.get("p"), a.get("dim"), a.get("maxnorm")
    if x is None or not x.get("shape") or type(dim) is not int \
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (p, maxnorm)):
        return None
    shape, dtype, base = list(x["shape"]), node["dtype"], node["name"]
    dim %= len(shape)
    kept = [n if d == dim else 1 for d, n in enumerate(shape)]
    strides = contiguous_strides(kept)

    def made(suffix: str, op: str, args: dict, target: str, out_dtype: str = dtype) -> Node:
        return new_node(_fresh(taken, f"{base}_{suffix}"), op, args, kept, strides, out_dtype, view=False, target=target)

    norm = made("norm", "linalg_vector_norm", {"self": ref(x["name"]), "ord": p,
                                               "dim": [d for d in range(len(shape)) if d != dim], "keepdim": True,
                                               "dtype": None}, "aten.linalg_vector_norm.default")
    over = made("over", "gt", {"self": ref(norm["name"]), "other": maxnorm}, "aten.gt.Scalar", "bool")
    padded = made("padded", "add", {"self": ref(norm["name"]), "other": 1e-7, "alpha": 1}, "aten.add.Tensor")
    inv = made("inv", "reciprocal", {"self": ref(padded["name"])}, "aten.reciprocal.default")
    scaled = made("scaled", "mul", {"self": ref(inv["name"]), "other": maxnorm}, "aten.mul.Tensor")
    factor = made("factor", "where", {"condition": ref(over["name"]), "self": ref(scaled["name"]), "other": 1.0},
                  "aten.where.ScalarOther")
    return [norm, over, padded, inv, scaled, factor,
            {**node, "op": "mul", "target": "aten.mul.Tensor", "args": {"self": ref(x["name"]), "other": ref(factor["name"])}}], set()
