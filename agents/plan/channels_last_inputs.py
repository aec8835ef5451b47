"""A convolution whose input already lies channels-last keeps that layout, in and out.

Vision transformers hand a linear layer's [N, H*W, C] tokens to a convolution as a permuted view,
[N, C, H, W] over channels-last storage, without .contiguous(): PVTv2's and SegFormer's Mix-FFN
(a depthwise 3x3 between fc1 and fc2), their spatial-reduction attention (a strided patch
convolution), CvT's projections. PyTorch's convolution follows its input's memory format, so the
result comes back channels-last too, and the flatten/transpose to tokens after it is free.

The planner stored every kernel result contiguous (fresh_layouts) and the convolution emitters read
contiguous NCHW inputs, so such a convolution cost two transposing copies around it: on the H200
PVTv2's Mix-FFN spent 188 us copying fc1's 103 MB result to NCHW and 185 us reading the NCHW result
back as tokens, beside 85 us of convolution (bench/networks2, fc73d70). Here the convolution runs
cuDNN's NHWC plan on the storage as it is (emit_conv's input_channels_last and channels_last),
its result stays channels-last as traced, and its readers see it through a permuted view with the
traced strides, so every view after it is unchanged. A bias becomes an add of [C] over the stored
result, which the planner fuses into what reads it (a channels-last result takes no bias in the
emitter).

Only where PyTorch itself kept the result channels-last (the traced strides say so), the input is a
view of a result of this forward (a forward input's layout is the caller's, not the trace's), and
every reader of the result reads it through views as a row-major tensor (the tokens again).
"""

from __future__ import annotations

import os

from stitchcuda.agents.graph import (
    Node,
    by_name,
    contiguous_strides,
    fresh_name,
    is_contiguous,
    new_node,
    readers_of,
    ref,
    ref_name,
    view_root,
)

# "0" leaves such convolutions to the contiguous NCHW path (for same-run comparisons, and a way out).
CHANNELS_LAST_INPUTS_ENV = "STITCHCUDA_CONV_CHANNELS_LAST_INPUTS"
_DTYPES = ("float32", "float16", "bfloat16")


def _channels_last_strides(shape: list[int]) -> list[int]:
    n, c, h, w = shape
    return [h * w * c, 1, w * c, c]


def _same_layout(shape: list[int], stride: list[int], want: list[int]) -> bool:
    """Strides equal where they matter (a dimension of one element has no stride that counts)."""
    return all(n == 1 or s == w for n, s, w in zip(shape, stride, want, strict=True))


def _read_row_major(conv: Node, readers: dict[str, list[Node]]) -> bool:
    """Whether every read of `conv`'s result goes through views to a row-major tensor (tokens,
    [N, H*W, C]), so that its channels-last storage is what its readers want. A kernel reading the
    NCHW view itself (a training batch norm after PointNet++'s 1x1 convolutions) would get a
    transposing copy of it, and one back to channels-last for the next convolution: on the H200
    that made PointNet++'s SA 0.368 ms against 0.313 with the NCHW plan (6b2f548)."""
    todo, seen = [conv], 0
    while todo:
        node = todo.pop()
        for r in readers.get(node["name"], []):
            seen += 1
            if r.get("view"):
                todo.append(r)
            elif node is conv or not is_contiguous(node) or r["op"] in ("copy_", "set_") or r["op"].endswith("_"):
                return False
    return seen > 0


def kept_layout_convs(graph: list[Node]) -> frozenset[str]:
    """The convolutions this module rewrites: 2-D, forward, floating point, in one cuDNN call, their
    input a channels-last view (offset 0) of a result computed in forward, and their traced result
    channels-last as well."""
    if os.environ.get(CHANNELS_LAST_INPUTS_ENV, "1") == "0":
        return frozenset()
    from stitchcuda.agents.coder.emit_conv import NotSupported, batch_chunk, conv_params

    nodes = by_name(graph)
    readers = readers_of(graph)
    kept = set()
    for conv in graph:
        a = conv.get("args", {})
        shape = conv.get("shape") or []
        if conv["op"] != "convolution" or len(shape) != 4 or conv.get("dtype") not in _DTYPES \
                or a.get("transposed") or a.get("channels_last") or a.get("input_channels_last"):
            continue
        x = nodes.get(ref_name(a.get("input")) or "")
        w = nodes.get(ref_name(a.get("weight")) or "")
        # (A computed result traced channels-last is stored row-major by the planner: no view of it to take.)
        if x is None or w is None or not x.get("view") or x.get("shape") is None or w.get("shape") is None \
                or len(x["shape"]) != 4:
            continue
        if shape[1] == 1 or x["shape"][1] == 1 or x.get("offset", 0) != 0 or x.get("dtype") != conv["dtype"]:
            continue  # (one channel: channels-last is NCHW; an offset view is no tensor cuDNN takes whole)
        if not _same_layout(x["shape"], x["stride"], _channels_last_strides(x["shape"])) \
                or not _same_layout(shape, conv.get("stride") or [], _channels_last_strides(shape)):
            continue
        if view_root(nodes, x["name"])["op"] in ("input", "constant") or not _read_row_major(conv, readers):
            continue
        try:
            p = conv_params(x["shape"], w["shape"], a.get("stride"), a.get("padding"), a.get("dilation"), False,
                            a.get("output_padding", [0]), a.get("groups", 1))
            if p.lifted or batch_chunk(p) < p.x[0] or list(p.out_shape) != list(shape):
                continue
        except NotSupported:
            continue
        kept.add(conv["name"])
    return frozenset(kept)


def convs_on_channels_last_inputs(graph: list[Node], names: frozenset[str]) -> list[Node]:
    """Each convolution of `names` (kept_layout_convs, still as traced) as: a permuted view of its
    input in N, H, W, C order (contiguous over the storage), the convolution on it stored N, H, W, C,
    the bias added over that (as [C] along its last dimension), and a view of the sum in N, C, H, W
    order, with the traced strides, under the convolution's name: its readers are unchanged."""
    names = names & kept_layout_convs(graph)  # (as the passes between left them)
    if not names:
        return graph
    nodes = by_name(graph)
    taken = {n["name"] for n in graph}
    out: list[Node] = []
    for conv in graph:
        if conv["name"] not in names or conv["op"] != "convolution":
            out.append(conv)
            continue
        a = conv["args"]
        x = nodes[ref_name(a["input"])]
        n, c, h, w = x["shape"]
        s = x["stride"]
        dtype = conv["dtype"]
        x_nhwc = fresh_name(taken, f"{x['name']}_nhwc")
        out.append(new_node(x_nhwc, "permute", {"self": ref(x["name"]), "dims": [0, 2, 3, 1]}, [n, h, w, c],
                            [s[0], s[2], s[3], s[1]], dtype, view=True, offset=x.get("offset", 0)))
        on, oc, oh, ow = conv["shape"]
        raw = fresh_name(taken, f"{conv['name']}_nhwc")
        stored = [on, oh, ow, oc]
        out.append({**conv, "name": raw, "shape": stored, "stride": contiguous_strides(stored), "offset": 0,
                    "args": {**a, "input": ref(x_nhwc), "bias": None, "channels_last": True,
                             "input_channels_last": True}})
        st = contiguous_strides(stored)
        bias = ref_name(a.get("bias"))
        if bias is not None:
            # Over the stored N, H, W, C, where [C] broadcasts along the last dimension: a reader
            # of the tokens (a norm's rows, a pointwise chain) reads the sum row-major.
            biased = fresh_name(taken, f"{conv['name']}_biased")
            out.append(new_node(biased, "add", {"self": ref(raw), "other": ref(bias), "alpha": 1}, stored, st, dtype,
                                view=False, target="aten.add.Tensor"))
            raw = biased
        out.append(new_node(conv["name"], "permute", {"self": ref(raw), "dims": [0, 3, 1, 2]}, conv["shape"],
                            [st[0], st[3], st[1], st[2]], dtype, view=True))
    return out
