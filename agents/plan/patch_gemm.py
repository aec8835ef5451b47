"""A convolution over non-overlapping patches, as one GEMM.

A convolution whose stride equals its kernel, with no padding or dilation and one group, reads each
input element exactly once: each output pixel is the same linear map of one patch. That is a GEMM of
the patches laid out as rows, [N * O..., C * k...], with the weight as [C * k..., C_out]. ViT's,
Swin's and ConvNeXt's stems are such convolutions. cuDNN ran ViT's 16x16 stride-16 patchify on
fp32 FMA kernels even under the TF32 policy, 131.6 us on an H200, where torch.compile's TF32 kernel
took 92.1 (bench/coverage's vit_patch_embed, 2026-11-30). As a GEMM it goes to cuBLASLt, under the
precision rung's policy like any other product, with the bias in its epilogue.

The patches are gathered by one layout copy (a view of the input as [N, C, O1, k1, O2, k2, ...],
permuted to [N, O1, O2, ..., C, k1, k2, ...]). The product's rows are channels-last, and another
copy writes them in the convolution's layout, under its name, so every reader is unchanged."""

from __future__ import annotations

import math
import os

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    new_node,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh

# "0" leaves patch convolutions to the convolution emitters: for same-run comparisons.
PATCH_GEMM_ENV = "STITCHCUDA_PATCH_GEMM"
MIN_PATCH = 4  # elements a patch's window covers per channel, at least (2 x 2): smaller ones stay convolutions


def patch_convs_as_gemms(graph: list[Node]) -> list[Node]:
    if os.environ.get(PATCH_GEMM_ENV, "1") == "0":
        return graph
    return rewrite_nodes(graph, _as_gemm)


def _as_gemm(node: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    parts = _patch_conv(node, nodes)
    if parts is None:
        return None
    x, w, bias = parts
    n, c, *size = x["shape"]
    c_out, _, *k = w["shape"]
    outs = [s // kk for s, kk in zip(size, k, strict=True)]
    nd, dtype, base = len(k), node["dtype"], node["name"]
    rows, depth = n * math.prod(outs), c * math.prod(k)

    def made(suffix: str, op: str, args: dict, shape: list[int], stride: list[int], *, view: bool,
             offset: int = 0, target: str | None = None) -> Node:
        return new_node(_fresh(taken, f"{base}_{suffix}"), op, args, shape, stride, dtype, view=view,
                        offset=offset, target=target)

    # The input as patches: [N, C, O1, k1, ...] (a view), permuted to [N, O..., C, k...], made contiguous.
    split = [n, c, *[d for o, kk in zip(outs, k, strict=True) for d in (o, kk)]]
    xs = x["stride"]
    split_stride = [xs[0], xs[1], *[d for i, kk in enumerate(k) for d in (xs[2 + i] * kk, xs[2 + i])]]
    tiles = made("tiles", "view", {"self": ref(x["name"]), "size": split}, split, split_stride, view=True,
                 offset=x.get("offset", 0), target="aten.view.default")
    dims = [0, *[2 + 2 * i for i in range(nd)], 1, *[3 + 2 * i for i in range(nd)]]
    order = [split[d] for d in dims]
    moved = made("patch_order", "permute", {"self": ref(tiles["name"]), "dims": dims}, order,
                 [split_stride[d] for d in dims], view=True, offset=x.get("offset", 0), target="aten.permute.default")
    packed = made("patches", "clone", {"self": ref(moved["name"]), "memory_format": "torch.contiguous_format"},
                  order, contiguous_strides(order), view=False, target="aten.clone.default")
    flat = made("patch_rows", "view", {"self": ref(packed["name"]), "size": [rows, depth]}, [rows, depth],
                [depth, 1], view=True, target="aten.view.default")
    # The weight [C_out, C, k...] as [C_out, C * k...], read transposed.
    w_rows = made("w_rows", "view", {"self": ref(w["name"]), "size": [c_out, depth]}, [c_out, depth], [depth, 1],
                  view=True, offset=w.get("offset", 0), target="aten.view.default")
    w_t = made("w_t", "t", {"self": ref(w_rows["name"])}, [depth, c_out], [1, depth], view=True,
               offset=w.get("offset", 0), target="aten.t.default")
    if bias is not None:
        prod = made("rows", "addmm", {"self": ref(bias["name"]), "mat1": ref(flat["name"]), "mat2": ref(w_t["name"]),
                                      "beta": 1, "alpha": 1}, [rows, c_out], [c_out, 1], view=False,
                    target="aten.addmm.default")
    else:
        prod = made("rows", "mm", {"self": ref(flat["name"]), "mat2": ref(w_t["name"])}, [rows, c_out], [c_out, 1],
                    view=False, target="aten.mm.default")
    pixels = [n, *outs, c_out]
    per = made("pixels", "view", {"self": ref(prod["name"]), "size": pixels}, pixels, contiguous_strides(pixels),
               view=True, target="aten.view.default")
    back = [0, nd + 1, *range(1, nd + 1)]
    ps = contiguous_strides(pixels)
    first = made("channels_first", "permute", {"self": ref(per["name"]), "dims": back}, [pixels[d] for d in back],
                 [ps[d] for d in back], view=True, target="aten.permute.default")
    result = {**node, "op": "clone", "target": "aten.clone.default", "view": False,
              "args": {"self": ref(first["name"]), "memory_format": "torch.contiguous_format"},
              "stride": contiguous_strides(node["shape"]), "offset": 0,
              "folded": f"convolution {base} over non-overlapping {'x'.join(map(str, k))} patches as one GEMM "
                        f"({rows} x {depth} x {c_out}), the patches gathered by a layout copy"}
    return [tiles, moved, packed, flat, w_rows, w_t, prod, per, first, result], set()


def _patch_conv(node: Node, nodes: dict[str, Node]) -> tuple[Node, Node, Node | None] | None:
    """(input, weight, bias or None) of a convolution over non-overlapping patches this rewrite takes."""
    if node["op"] != "convolution" or node.get("dtype") not in FLOAT_DTYPES or node.get("view"):
        return None
    a = node["args"]
    x = nodes.get(ref_name(a.get("input")) or "")
    w = nodes.get(ref_name(a.get("weight")) or "")
    b_name = ref_name(a.get("bias"))
    bias = nodes.get(b_name) if b_name else None
    if x is None or w is None or (b_name and bias is None) or a.get("transposed") or a.get("groups", 1) != 1:
        return None
    shape, ws = x.get("shape") or [], w.get("shape") or []
    k = ws[2:]
    nd = len(k)
    if nd not in (1, 2, 3) or len(shape) != nd + 2 or len(node.get("shape") or []) != nd + 2:
        return None
    stride, padding, dilation = (list(a.get(key) or []) for key in ("stride", "padding", "dilation"))
    if stride != k or any(padding) or any(d != 1 for d in dilation) or math.prod(k) < MIN_PATCH:
        return None
    if any(s % kk for s, kk in zip(shape[2:], k, strict=True)):  # (a remainder the convolution drops)
        return None
    if x.get("stride") != contiguous_strides(shape) or w.get("stride") != contiguous_strides(ws):
        return None
    if not (x["dtype"] == w["dtype"] == node["dtype"]) or (bias is not None and (bias["dtype"] != node["dtype"]
                                                                                  or bias.get("shape") != [ws[0]])):
        return None
    if ws[1] != shape[1] or node["shape"] != [shape[0], ws[0], *[s // kk for s, kk in zip(shape[2:], k, strict=True)]]:
        return None
    return x, w, bias
