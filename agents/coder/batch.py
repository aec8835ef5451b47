"""Is the leading dimension of forward's inputs a batch, every sample computed on its own?

Then a module generated at the traced batch B serves any batch size: the kernels run over chunks of
B samples (the last one padded), and the reference math (`_reference`) takes the batch size from its
inputs. This walks the traced graph once and follows the batch dimension through each node by a
small table of rules (pointwise broadcasting, reductions over other dimensions, per-sample ops such
as convolution and pooling, matmuls whose left operand carries the batch, views that keep it
outermost). Any node that mixes samples (a reduction or a training-mode BatchNorm over the batch, a
reshape that merges it with another dimension, a weight that depends on it) or that the table does
not know makes the whole module fixed-size, with the reason. The Verifier then checks every
dynamic candidate at other batch sizes, so a rule too generous here shows as a wrong result, never
as a silent one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stitchcuda.agents.coder.codegen import POINTWISE
from stitchcuda.agents.graph import Node, by_name, iter_refs, ref_name, view_root


@dataclass(frozen=True)
class BatchInfo:
    size: int | None  # the traced batch; None: fixed-size (see reason)
    reason: str = ""
    dims: dict[str, int] = field(default_factory=dict)  # node -> its batch dimension (batch-carrying nodes only)
    # node -> how many rows of its batch dimension each sample has, where a reshape merged the batch
    # with the dimensions after it (a linear layer on [B, T, F] runs on [B*T, F]): samples stay
    # outermost, in blocks of that many rows. 1 where not listed.
    factors: dict[str, int] = field(default_factory=dict)

    @property
    def dynamic(self) -> bool:
        return self.size is not None


class _Mixes(Exception):
    pass


# Reductions and scans: (argument naming the dims, argument saying keepdim or None when dims stay).
_REDUCTIONS: dict[str, tuple[str, str | None]] = {
    "sum": ("dim", "keepdim"), "mean": ("dim", "keepdim"), "amax": ("dim", "keepdim"),
    "amin": ("dim", "keepdim"), "prod": ("dim", "keepdim"), "logsumexp": ("dim", "keepdim"),
    "var": ("dim", "keepdim"), "std": ("dim", "keepdim"), "var_mean": ("dim", "keepdim"),
    "linalg_vector_norm": ("dim", "keepdim"), "argmax": ("dim", "keepdim"), "argmin": ("dim", "keepdim"),
    "any": ("dim", "keepdim"), "all": ("dim", "keepdim"), "max": ("dim", "keepdim"), "min": ("dim", "keepdim"),
    "_softmax": ("dim", None), "_log_softmax": ("dim", None), "_safe_softmax": ("dim", None),
    "topk": ("dim", None), "sort": ("dim", None), "cumsum": ("dim", None), "cumprod": ("dim", None), "logcumsumexp": ("dim", None), "cummax": ("dim", None), "cummin": ("dim", None),
    "median": ("dim", "keepdim"), "nanmedian": ("dim", "keepdim"), "kthvalue": ("dim", "keepdim"),
}  # fmt: skip
# Ops whose first tensor argument carries the batch at dim 0 into every result at dim 0, with every
# other tensor argument (weights, biases, statistics) batch-free.
_PER_SAMPLE = {
    "convolution", "_convolution", "max_pool2d_with_indices", "max_pool3d_with_indices", "max_pool1d",
    "max_pool2d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_max_pool2d", "native_group_norm", "_native_batch_norm_legit_no_training",
    "upsample_nearest2d", "upsample_bilinear2d", "upsample_bicubic2d", "pixel_shuffle", "pixel_unshuffle", "constant_pad_nd",
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "im2col", "col2im", "assembled", "channel_shuffle",
}  # fmt: skip
_SAME = {"clone", "alias", "contiguous", "_to_copy", "detach", "lift_fresh_copy"}
_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"}
_CREATE = {"zeros", "ones", "empty", "full", "new_zeros", "new_ones", "new_empty", "new_full", "scalar_tensor"}
_VIEWS = {"view", "_unsafe_view", "reshape"}


def analyse(graph: Sequence[Node]) -> BatchInfo:
    """The batch of forward's tensor arguments (their common dim 0), if every sample is computed on
    its own; else fixed-size, with the reason."""
    args = [n for n in graph if n["op"] == "input" and n.get("kind") == "arg" and n.get("shape") is not None]
    if any(n["op"] == "input" and n.get("kind") == "draw" for n in graph):
        # (a draw is made at the traced shape: a chunk of another batch would need other numbers)
        return BatchInfo(None, "forward draws random numbers")
    if not args:
        return BatchInfo(None, "forward takes no tensor arguments")
    sizes = {n["shape"][0] if n["shape"] else None for n in args}
    if len(sizes) != 1 or None in sizes:
        return BatchInfo(None, "forward's tensor arguments do not share a leading dimension")
    (size,) = sizes
    if size < 2:
        return BatchInfo(None, f"the traced batch is {size}: trace at a batch of 2 or more to make it dynamic")
    nodes = by_name(graph)
    dims: dict[str, int] = {n["name"]: 0 for n in args}
    multi: dict[str, int] = {}  # multi-result node -> the batch dim of its results
    factors: dict[str, int] = {}
    try:
        for node in graph:
            op = node["op"]
            if op in ("input", "constant"):
                continue
            if op == "output":
                for value in node["args"]["values"]:
                    name = ref_name(value)
                    if name is not None and (dims.get(name) != 0 or factors.get(name, 1) != 1):
                        raise _Mixes(f"an output ({name}) does not keep the batch as its first dimension")
                    root = _view_root(nodes, name) if name is not None else None
                    if root is not None and dims.get(root) != 0:
                        # ModelNew allocates the storage an output views, batch first, per chunk.
                        raise _Mixes(f"an output ({name}) views a tensor whose first dimension is not the batch")
                continue
            got = _rule(node, nodes, dims, multi, size, factors)
            if got is not None:
                if node.get("shape") is None:
                    multi[node["name"]] = got
                else:
                    dims[node["name"]] = got
                factor = _factor(node, nodes, dims, multi, factors, size)
                if factor != 1:
                    factors[node["name"]] = factor
    except _Mixes as e:
        return BatchInfo(None, str(e))
    return BatchInfo(size, "", dims, factors)


def _view_root(nodes: dict[str, Node], name: str) -> str:
    return view_root(nodes, name)["name"]


def _factor(node: Node, nodes: dict[str, Node], dims: dict[str, int], multi: dict[str, int],
            factors: dict[str, int], size: int) -> int:
    """Rows per sample in this node's batch dimension: a reshape sets it from its first dimension
    (samples outermost: any multiple of the batch), every other op keeps its operands'."""
    if node["op"] in _VIEWS or node["op"] in ("flatten", "unflatten"):
        return node["shape"][0] // size
    operands = [n for v in node.get("args", {}).values() for n in iter_refs(v) if n in dims or n in multi]
    found = {factors.get(n, 1) for n in operands}
    if len(found) > 1:
        raise _Mixes(f"{node.get('target')}: its operands split samples into different row blocks")
    return found.pop() if found else 1


def _rule(node: Node, nodes: dict[str, Node], dims: dict[str, int], multi: dict[str, int], size: int,
          factors: dict[str, int]) -> int | None:
    """The batch dim of this node's result(s), None when batch-free; raises _Mixes."""
    op, args = node["op"], node.get("args", {})
    tagged = {n: dims[n] for v in args.values() for n in iter_refs(v) if n in dims}
    tagged.update({n: multi[n] for v in args.values() for n in iter_refs(v) if n in multi})
    shape = node.get("shape")
    if op == "copy_":
        raise _Mixes("forward writes module state (running statistics): samples are not independent")
    if op == "getitem":
        src = node.get("source") or ref_name(args.get("self"))
        if src in multi:
            return multi[src]
        return _moved(dims.get(ref_name(args.get("self")) or ""), node, nodes, op, size)
    if op in _CREATE:
        # A tensor made inside forward whose first dimension is the batch (zeros(B, ...)): the same
        # for every sample, and made per chunk at the chunk's size.
        return 0 if shape and shape[0] == size else None
    if not tagged:
        if op == "expand" and shape and shape[0] == size:
            return 0  # a batch-free tensor repeated for every sample (a class token): made per chunk
        # Batch-free, whatever its sizes: where one of them merely equals the batch and meets a
        # batched tensor, _broadcast refuses it.
        return None
    first = ref_name(args.get("self") or args.get("input"))
    if op in _SAME or op in _LIKE:
        return tagged.get(first or "", _only(tagged, node))
    if op in POINTWISE and shape is not None:
        return _broadcast(node, nodes, tagged, size)
    if op in _REDUCTIONS:
        return _reduced(node, nodes, tagged, op)
    if op in _PER_SAMPLE or op in ("native_batch_norm", "native_layer_norm"):
        return _per_sample(node, nodes, tagged, op)
    if op in ("mm", "addmm"):
        left = ref_name(args.get("self" if op == "mm" else "mat1"))
        right = ref_name(args.get("mat2"))
        bias = ref_name(args.get("self")) if op == "addmm" else None
        if left in tagged and tagged[left] == 0 and right not in tagged and bias not in tagged:
            return 0
        raise _Mixes(f"{node['target']}: the batch is not only in the rows of its left operand")
    if op in ("bmm", "baddbmm"):
        pair = ("self", "mat2") if op == "bmm" else ("batch1", "batch2")
        if all(tagged.get(ref_name(args.get(k)) or "") == 0 for k in pair) and set(tagged.values()) == {0}:
            return 0
        raise _Mixes(f"{node['target']}: the batch is not the leading dimension of both operands")
    if op == "sc_dim_norm":
        # agents/plan/dim_norm.py: statistics over one dim, so samples stay apart unless it is that dim.
        dim = tagged.get(ref_name(args.get("input")) or "")
        if dim is not None and dim != args.get("dim") and len(tagged) == 1:
            return dim
        raise _Mixes("sc_dim_norm: the batch is the normalised dim")
    if op == "sc_attention":
        # planner.fuse_attention's chain: two products per (sample, head) and a softmax over keys.
        # Samples stay apart where q, k and v carry the batch first (in the same row blocks: _factor)
        # and each mask is batch-free or carries it first too, in the same row blocks (SAM's relative
        # position terms, made from q): a chunk of the traced batch then has its masks' own chunk.
        operands = [ref_name(args.get(k)) for k in ("query", "key", "key_t", "value") if args.get(k) is not None]
        masks = [ref_name(m) for m in args.get("masks", [])]
        if all(tagged.get(n or "") == 0 for n in operands) and all(tagged.get(m or "", 0) == 0 for m in masks):
            return 0
        raise _Mixes("sc_attention: the batch is not the leading dimension of q, k and v, and of each mask that has it")
    if op in _VIEWS or op in ("permute", "transpose", "t", "unsqueeze", "squeeze", "expand", "slice", "select",
                              "narrow", "split", "split_with_sizes", "unbind", "chunk", "flatten", "unflatten"):
        return _moved(tagged.get(first or "", _only(tagged, node)), node, nodes, op, size)
    if op in ("cat", "stack"):
        return _joined(node, nodes, tagged, op, size)
    if op in _INDEXED:
        return _indexed(node, nodes, tagged, op)
    raise _Mixes(f"{node['target']} over the batch is not known to compute each sample on its own")


def _only(tagged: dict[str, int], node: Node) -> int:
    values = set(tagged.values())
    if len(values) != 1:
        raise _Mixes(f"{node.get('target')}: inputs carry the batch in different dimensions")
    return values.pop()


def _ndim(name: str | None, nodes: dict[str, Node]) -> int:
    shape = nodes[name].get("shape") if name in nodes else None
    return len(shape) if shape is not None else 0


def _broadcast(node: Node, nodes: dict[str, Node], tagged: dict[str, int], size: int) -> int:
    out = len(node["shape"])
    where = set()
    for name, dim in tagged.items():
        where.add(dim + out - _ndim(name, nodes))
    if len(where) != 1:
        raise _Mixes(f"{node['target']}: its operands carry the batch in different dimensions")
    (dim,) = where
    for value in node["args"].values():
        name = ref_name(value)
        if name is None or name in tagged or name not in nodes or nodes[name].get("shape") is None:
            continue
        shape = nodes[name]["shape"]
        at = dim - (out - len(shape))
        if 0 <= at < len(shape) and shape[at] != 1:
            raise _Mixes(f"{node['target']}: a batch-free operand ({name}) spans the batch dimension")
    return dim


def _dims(value: Any, ndim: int) -> list[int] | None:
    if value is None or value == []:
        return None
    values = value if isinstance(value, list) else [value]
    return [int(v) % max(ndim, 1) for v in values]


def _reduced(node: Node, nodes: dict[str, Node], tagged: dict[str, int], op: str) -> int:
    dim_arg, keep_arg = _REDUCTIONS[op]
    src = ref_name(node["args"].get("self") or node["args"].get("input"))
    if src not in tagged:
        raise _Mixes(f"{node['target']}: the batch enters through an argument other than its input")
    bdim, ndim = tagged[src], _ndim(src, nodes)
    dims = _dims(node["args"].get(dim_arg), ndim)
    if dims is None or bdim in dims:
        raise _Mixes(f"{node['target']} reduces over the batch")
    if keep_arg is None or node["args"].get(keep_arg):
        return bdim
    return bdim - sum(1 for d in dims if d < bdim)


def _per_sample(node: Node, nodes: dict[str, Node], tagged: dict[str, int], op: str) -> int:
    if op == "assembled":  # (planner's assembled.py: every copy covers the batch whole, sample for sample)
        if set(tagged.values()) != {0} or set(tagged) != {ref_name(s) for s in node["args"]["sources"]}:
            raise _Mixes(f"{node['target']}: a source without the batch leading")
        return 0
    first = ref_name(node["args"].get("input") or node["args"].get("self"))
    if set(tagged) != {first} or tagged[first] != 0:
        raise _Mixes(f"{node['target']}: the batch is not only the leading dimension of its input")
    if op == "native_batch_norm" and node["args"].get("training"):
        raise _Mixes("a training-mode BatchNorm normalises over the batch")
    if op == "native_layer_norm" and len(node["args"].get("normalized_shape") or []) >= _ndim(first, nodes):
        raise _Mixes(f"{node['target']} normalises over the batch")
    return 0


def _moved(bdim: int | None, node: Node, nodes: dict[str, Node], op: str, size: int) -> int | None:
    """The batch dim after a view, a reshape or a pick of pieces."""
    if bdim is None:
        return None
    args = node["args"]
    src = ref_name(args.get("self") or args.get("input"))
    ndim_in = _ndim(src, nodes)
    shape = node.get("shape")
    if op in _VIEWS or op in ("flatten", "unflatten"):
        # Row-major: samples stay the outermost blocks of elements exactly where the first
        # dimension after the reshape is a multiple of the batch (a split or merge after it).
        if bdim == 0 and shape and shape[0] % size == 0:
            return 0
        raise _Mixes(f"{node['target']} merges the batch with another dimension")
    if op == "permute":
        return [int(d) % ndim_in for d in args["dims"]].index(bdim)
    if op in ("transpose", "t"):
        a, b = (0, 1) if op == "t" else (int(args["dim0"]) % ndim_in, int(args["dim1"]) % ndim_in)
        return b if bdim == a else a if bdim == b else bdim
    if op == "unsqueeze":
        d = int(args["dim"]) % (ndim_in + 1)
        return bdim + (d <= bdim)
    if op == "squeeze":
        dims = _dims(args.get("dim"), ndim_in)
        in_shape = nodes[src]["shape"]
        dropped = [d for d in range(ndim_in) if in_shape[d] == 1 and (dims is None or d in dims)]
        if bdim in dropped:
            raise _Mixes("squeeze drops the batch dimension")
        return bdim - sum(1 for d in dropped if d < bdim)
    if op == "expand":
        return bdim + (len(shape) - ndim_in)
    if op in ("slice", "narrow", "split", "split_with_sizes", "chunk"):
        if int(args.get("dim", 0)) % max(ndim_in, 1) == bdim:
            raise _Mixes(f"{node['target']} cuts along the batch")
        return bdim
    if op in ("select", "unbind"):
        d = int(args.get("dim", 0)) % max(ndim_in, 1)
        if d == bdim:
            raise _Mixes(f"{node['target']} picks along the batch")
        return bdim - (d < bdim)
    if op == "getitem":
        return bdim
    raise _Mixes(f"{node['target']}: unknown view")


# Reads through an index: (the argument read from, the index argument, the argument naming the dim).
_INDEXED = {"roll": ("self", None, "dims"), "index_select": ("self", "index", "dim"),
            "gather": ("self", "index", "dim"), "embedding": ("weight", "indices", None),
            "index": ("self", "indices", None)}


def _indexed(node: Node, nodes: dict[str, Node], tagged: dict[str, int], op: str) -> int:
    src_arg, index_arg, dim_arg = _INDEXED[op]
    args = node["args"]
    src = ref_name(args.get(src_arg))
    index = [n for n in iter_refs(args.get(index_arg))] if index_arg else []
    if op == "embedding":
        # Rows of a batch-free table picked per sample: the batch is the indices'.
        if src in tagged or len(index) != 1 or index[0] not in tagged:
            raise _Mixes("embedding: the batch is not only in the indices")
        return tagged[index[0]]
    if src not in tagged:
        raise _Mixes(f"{node['target']}: the batch enters through its index")
    bdim, ndim = tagged[src], _ndim(src, nodes)
    if op == "index":
        picks = args.get("indices") or []
        if len(picks) > bdim and picks[bdim] is not None or any(n in tagged for n in index):
            raise _Mixes(f"{node['target']} indexes along the batch")
        given = [p for p, i in enumerate(picks) if i is not None]
        if given and given != list(range(given[0], given[-1] + 1)):
            raise _Mixes(f"{node['target']}: index tensors apart put their shape first")
        if given and bdim > given[-1]:  # the indexed dims become the index's shape, before the batch
            return bdim - len(given) + len(node["shape"]) - (ndim - len(given))
        return bdim
    dims = _dims(args.get(dim_arg), ndim) or []
    if bdim in dims:
        raise _Mixes(f"{node['target']} moves elements along the batch")
    if op == "gather":
        if len(index) != 1 or tagged.get(index[0]) != bdim:
            raise _Mixes("gather: its index does not carry the batch where its input does")
    elif any(n in tagged for n in index):
        raise _Mixes(f"{node['target']}: the batch enters through its index")
    return bdim


def _joined(node: Node, nodes: dict[str, Node], tagged: dict[str, int], op: str, size: int) -> int:
    names = [n for n in iter_refs(node["args"].get("tensors"))]
    if any(n not in tagged for n in names):
        raise _Mixes(f"{node['target']}: joins batch-free tensors with batched ones")
    bdim = _only(tagged, node)
    ndim = _ndim(names[0], nodes) + (op == "stack")
    d = int(node["args"].get("dim", 0)) % max(ndim, 1)
    if op == "cat":
        if d == bdim:
            raise _Mixes("cat along the batch")
        return bdim
    return bdim + (d <= bdim)
