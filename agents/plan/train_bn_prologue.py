"""Training-mode batch norm before a depthwise convolution, or (STITCHCUDA_BN_PROLOGUE_KERNELS=1)
before a softmax, a reduction or a pool: statistics in the norm's kernel, the normalisation in the
reading kernel's prologue.

MobileNet and EfficientNet blocks run batch norm, ReLU6, then a depthwise convolution. In training
mode the norm's kernel reads its input once for the statistics and again to write the normalised,
activated tensor, which the depthwise kernel then reads: on level 3's EfficientNetMBConv (H200) that
write-and-read pass took 666 us of the block's 3.14 ms. Here the norm keeps only its statistics
(save_mean, save_invstd, and the running statistics it updates): its normalised result is rewritten
as the pointwise chain PyTorch computes, ((x - mean) * invstd) * weight + bias with per-channel views
of the statistics, so the activation after it joins the chain and the depthwise kernel computes the
whole chain as it stages its input (planner._take_prologues). The norm's emitter, asked for no
normalised result, launches no normalising pass.

Taken only where that prologue applies: the normalised result (fp32, 4-D) is read by one chain of
pointwise ops, each read once and by the next alone, whose end is the input of a depthwise convolution
(groups = channels > 1; NCHW only, emit_conv's staged prologue) or the operand a prologue kernel
computes as it reads (emit_reduce.PROLOGUE_OPS but norms: UNetSoftmax's softmax over the width, a
ResNet stem's max pool after ReLU; in a convolution's channels-last tail too, the channels then the
last dim), and nothing else; every other operand of the chain is per-channel or a number.

native_batch_norm's save_mean and save_invstd carry no gradient in PyTorch; the getitems that pick
them are marked (`batch_stats`) so the reference math the backward differentiates computes them as
mean and rsqrt(var + eps) of the input, which do."""

from __future__ import annotations

from typing import Any

from stitchcuda.agents.coder import codegen
from stitchcuda.agents.graph import (
    Node,
    by_name,
    contiguous_strides,
    fresh_name,
    iter_refs,
    new_node,
    readers_of,
    ref,
    ref_name,
    rewrite_nodes,
)

BN_OPS = ("native_batch_norm",)


def split_train_batch_norms(graph: list[Node], keep: frozenset[str] = frozenset(), *, convs: bool = True,
                            kernels: bool = False) -> tuple[list[Node], dict[str, str]]:
    """`graph` with each such batch norm (but those named in `keep`) computing its normalised result
    by pointwise nodes, and which norms were split, each with the kernel that is to take the chain:
    where its emitter does not (a plane too small for our depthwise kernel stays with cuDNN), the
    planner plans again with that norm in `keep`, as a stored chain would cost a pass of its own.
    `convs`: depthwise convolutions take the chain; `kernels`: so do the kernels that take a
    prologue (softmax, reductions, pools: bn_prologue_kernels_on)."""
    users = readers_of(graph)
    moves: dict[str, tuple[list[Node], set[str]]] = {}
    split: dict[str, str] = {}
    taken = {n["name"] for n in graph}
    nodes = by_name(graph)
    for bn in graph:
        found = _split(bn, nodes, users, taken, convs, kernels) if bn["name"] not in keep else None
        if found is not None:
            moves[found[0]] = (found[1], found[2])
            split[bn["name"]] = found[3]
    if not moves:
        return graph, split

    def rewrite(node: Node, *_: object) -> tuple[list[Node], set[str]] | None:
        return moves.get(node["name"])

    return rewrite_nodes(graph, rewrite), split


def _split(bn: Node, nodes: dict[str, Node], users: dict[str, list[Node]], taken: set[str], convs: bool,
           kernels: bool) -> tuple[str, list[Node], set[str], str] | None:
    """(the name of the normalised result's getitem, the nodes in its place, the getitems moved there,
    the kernel that takes the chain)."""
    a = bn.get("args", {})
    # (A norm in a convolution's channels-last tail reads and writes N, spatial..., C: its channels
    # are the last dim; only a prologue kernel takes its chain, as depthwise kernels read NCHW.)
    cl = bool(a.get("channels_last"))
    if bn["op"] not in BN_OPS or a.get("training") is not True or (cl and not kernels):
        return None
    picks = {int(u["args"].get("index", -1)): u for u in users.get(bn["name"], []) if u["op"] == "getitem"}
    if len(picks) != len(users.get(bn["name"], [])) or 0 not in picks:
        return None
    y = picks[0]
    shape = list(y.get("shape") or [])
    x = ref_name(a.get("input"))
    channels = shape[-1] if cl else (shape[1] if len(shape) > 1 else 0)
    if len(shape) != 4 or y.get("dtype") != "float32" or x is None or channels < 2:
        return None
    conv = _feeds_a_kernel(y, nodes, users, shape, 3 if cl else 1, convs=convs and not cl, kernels=kernels)
    if conv is None:
        return None
    per_channel = [1, 1, 1, channels] if cl else [1, channels, 1, 1]
    dims = [0, 1, 2] if cl else [0, 2, 3]
    eps = float(a.get("eps", 1e-5))
    out: list[Node] = []
    stats: dict[int, str] = {}
    for index in (1, 2):
        pick = picks.get(index)
        name = pick["name"] if pick is not None else fresh_name(taken, f"{bn['name']}_stat{index}")
        node = dict(pick) if pick is not None else new_node(
            name, "getitem", {"self": ref(bn["name"]), "index": index}, [channels], [1], "float32", view=False)
        if pick is None:
            node.pop("target")  # (a traced getitem has none)
        node["batch_stats"] = {"input": x, "dims": dims, "eps": eps}
        out.append(node)
        stats[index] = name

    def emit(base: str, op: str, args: dict[str, Any], like: list[int], *, view: bool = False,
             name: str | None = None) -> str:
        name = name or fresh_name(taken, f"{bn['name']}_{base}")
        target = "aten.view.default" if op == "view" else f"aten.{op}.Tensor"
        out.append(new_node(name, op, args, like, contiguous_strides(like), "float32", view=view, target=target))
        return name

    def channel(src: str) -> str:
        return emit("c", "view", {"self": ref(src), "size": per_channel}, per_channel, view=True)

    steps: list[tuple[str, str, str, dict[str, Any]]] = [
        ("centred", "sub", stats[1], {"alpha": 1}), ("normed", "mul", stats[2], {})]
    if ref_name(a.get("weight")) is not None:
        steps.append(("scaled", "mul", ref_name(a["weight"]), {}))
    if ref_name(a.get("bias")) is not None:
        steps.append(("shifted", "add", ref_name(a["bias"]), {"alpha": 1}))
    value = x
    for k, (base, op, operand, extra) in enumerate(steps):
        last = k == len(steps) - 1
        # The chain's end takes the result's name: every reader of it reads the chain unchanged.
        value = emit(base, op, {"self": ref(value), "other": ref(channel(operand)), **extra}, shape,
                     name=y["name"] if last else None)
    return y["name"], out, {stats[i] for i in (1, 2) if i in picks}, conv


def _per_channel(operand: list[int] | None, shape: list[int], cdim: int) -> bool:
    """Whether an operand of `operand`'s shape, broadcast against `shape`, is a number or varies along
    dim `cdim` (the channels) alone."""
    if operand is None or len(operand) > len(shape):
        return False
    padded = [1] * (len(shape) - len(operand)) + list(operand)
    return all(n == 1 or (d == cdim and n == shape[d]) for d, n in enumerate(padded))


def _feeds_a_kernel(y: Node, nodes: dict[str, Node], users: dict[str, list[Node]], shape: list[int], cdim: int,
                    *, convs: bool, kernels: bool) -> str | None:
    """The kernel that alone reads `y`, through a chain of pointwise ops of its shape each read once
    by the next, the chain's other operands per-channel (along dim `cdim`) or numbers: a depthwise convolution's input
    (`convs`), or the operand a prologue kernel computes as it reads (`kernels`: a softmax, a
    reduction, a pool: emit_reduce.PROLOGUE_OPS, batch and other norms aside); else None."""
    from stitchcuda.agents.coder.emit_norm import EMITTERS as NORMS
    from stitchcuda.agents.coder.emit_reduce import PROLOGUE_OPS, prologue_operand

    cur = y
    for _ in range(64):
        readers = users.get(cur["name"], [])
        if len(readers) != 1:
            return None
        (r,) = readers
        refs = list(iter_refs(r.get("args", {})))
        if refs.count(cur["name"]) != 1:
            return None
        if r["op"] == "convolution":
            ra = r["args"]
            ok = (convs and ref_name(ra.get("input")) == cur["name"] and not ra.get("transposed")
                  and ra.get("groups") == shape[1] and not ra.get("channels_last") and len(r.get("shape") or []) == 4)
            return r["name"] if ok else None
        # (Norms take a prologue too, but a norm after a batch norm is left as it was.)
        if r["op"] in PROLOGUE_OPS and r["op"] not in NORMS:
            return r["name"] if kernels and ref_name(r["args"].get(prologue_operand(r))) == cur["name"] else None
        if codegen.pointwise_support(r) is not None or list(r.get("shape") or []) != shape or r.get("view") \
                or r.get("dtype") != "float32":
            return None
        if any(other != cur["name"] and (other not in nodes or not _per_channel(nodes[other].get("shape"), shape, cdim))
               for other in refs):
            return None
        cur = r
    return None

