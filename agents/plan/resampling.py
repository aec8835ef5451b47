"""Resampling ops rewritten into the views and the one copy that compute them exactly, so they join
the pointwise work after them as a fused copy instead of a kernel of their own:

- pixel_shuffle / pixel_unshuffle: a view, a permute, a copy, a view (PyTorch's own decomposition);
- nearest upsampling by whole factors (upsample_nearest1d/2d/3d, and the nearest-exact ones): each
  input element repeated s times along each spatial dim, an expand of a view, a copy, a view.

The last node keeps the op's name, so every reader is unchanged. Nearest upsampling is rewritten only
where PyTorch's own index formula (its float scale, floored) picks input o // s for every output o,
checked by running that op on the index line of each dim; anything else (linear modes, fractional
factors) is left as it is, for emit_layout's resampling kernels. Found by a sweep of user-style
networks (UNet decoders, super-resolution heads), 2026-11-28."""

from __future__ import annotations

import math
from typing import Any

import torch

from stitchcuda.agents.graph import Node, by_name, contiguous_strides, is_contiguous, new_node, ref, ref_name
from stitchcuda.agents.graph import fresh_name as _fresh

_SHUFFLES = {"pixel_shuffle": "upscale_factor", "pixel_unshuffle": "downscale_factor"}
# upsample op -> (spatial dims, the scale arguments in dim order)
_NEAREST = {
    "upsample_nearest1d": (1, ("scales",)),
    "upsample_nearest2d": (2, ("scales_h", "scales_w")),
    "upsample_nearest3d": (3, ("scales_d", "scales_h", "scales_w")),
    "_upsample_nearest_exact1d": (1, ("scales",)),
    "_upsample_nearest_exact2d": (2, ("scales_h", "scales_w")),
    "_upsample_nearest_exact3d": (3, ("scales_d", "scales_h", "scales_w")),
}


def decompose_resampling(graph: list[Node]) -> list[Node]:
    taken = {n["name"] for n in graph}
    nodes = by_name(graph)
    out: list[Node] = []
    for node in graph:
        out.extend(_shuffle(node, nodes, taken) or _nearest(node, nodes, taken) or [node])
    return out


def _source(node: Node, nodes: dict[str, Node]) -> Node | None:
    """The op's input, where it is a contiguous tensor of a known shape (the views need that)."""
    x = nodes.get(ref_name(node.get("args", {}).get("self")) or "")
    if x is None or not x.get("shape") or not is_contiguous(x) or node.get("view") or not node.get("shape"):
        return None
    return x


def _copy_then_view(node: Node, src: str, shape: list[int], stride: list[int], taken: set[str]) -> list[Node]:
    """A contiguous copy of the view `src` (shape, stride), then the op's result as a view of it."""
    dtype, final = node["dtype"], list(node["shape"])
    copy = _fresh(taken, f"{node['name']}_copy")
    return [
        new_node(copy, "clone", {"self": ref(src), "memory_format": "torch.contiguous_format"}, shape,
              contiguous_strides(shape), dtype, view=False),
        new_node(node["name"], "_unsafe_view", {"self": ref(copy), "size": final}, final, contiguous_strides(final),
              dtype, view=True),
    ]


def _shuffle(node: Node, nodes: dict[str, Node], taken: set[str]) -> list[Node] | None:
    key = _SHUFFLES.get(node["op"])
    x = _source(node, nodes) if key else None
    r = node.get("args", {}).get(key) if key else None
    if x is None or type(r) is not int or r < 1 or len(x["shape"]) < 3:
        return None
    *lead, c, h, w = x["shape"]
    b = len(lead)
    if node["op"] == "pixel_shuffle":
        if c % (r * r):
            return None
        split = [*lead, c // (r * r), r, r, h, w]
        dims = [*range(b), b, b + 3, b + 1, b + 4, b + 2]  # [*, c, h, r, w, r]
    else:
        if h % r or w % r:
            return None
        split = [*lead, c, h // r, r, w // r, r]
        dims = [*range(b), b, b + 2, b + 4, b + 1, b + 3]  # [*, c, r, r, h, w]
    dtype, offset = node["dtype"], x.get("offset", 0)
    viewed, permuted = _fresh(taken, f"{node['name']}_split"), _fresh(taken, f"{node['name']}_perm")
    vstride = contiguous_strides(split)
    pshape, pstride = [split[d] for d in dims], [vstride[d] for d in dims]
    return [
        new_node(viewed, "view", {"self": ref(x["name"]), "size": split}, split, vstride, dtype, view=True, offset=offset),
        new_node(permuted, "permute", {"self": ref(viewed), "dims": dims}, pshape, pstride, dtype, view=True, offset=offset),
        *_copy_then_view(node, permuted, pshape, pstride, taken),
    ]


def _picks_floor(op: str, size: int, out: int, scale: Any) -> bool:
    """Whether PyTorch's `op` over a line of `size` elements to `out` picks element o // (out // size)."""
    fn = getattr(torch.ops.aten, op.replace("2d", "1d").replace("3d", "1d"))
    line = torch.arange(size, dtype=torch.float32).view(1, 1, size)
    got = fn(line, [out], scale if isinstance(scale, float | int) else None).view(-1)
    return torch.equal(got, (torch.arange(out) // (out // size)).to(torch.float32))


def _nearest(node: Node, nodes: dict[str, Node], taken: set[str]) -> list[Node] | None:
    spec = _NEAREST.get(node["op"])
    x = _source(node, nodes) if spec else None
    if x is None or spec is None:
        return None
    dims, scale_keys = spec
    a = node.get("args", {})
    shape, final = list(x["shape"]), list(node["shape"])
    if len(shape) != dims + 2 or len(final) != dims + 2 or final[:2] != shape[:2]:
        return None
    factors = []
    for d in range(dims):
        size, out = shape[2 + d], final[2 + d]
        if size < 1 or out % size or not _picks_floor(node["op"], size, out, a.get(scale_keys[d])):
            return None
        factors.append(out // size)
    # [N, C, S1, 1, S2, 1, ...] expanded to [N, C, S1, s1, S2, s2, ...]
    ones = [*shape[:2], *[v for s in shape[2:] for v in (s, 1)]]
    wide = [*shape[:2], *[v for s, f in zip(shape[2:], factors, strict=True) for v in (s, f)]]
    ostride = contiguous_strides(ones)
    estride = [0 if ones[i] == 1 and wide[i] != 1 else ostride[i] for i in range(len(wide))]
    dtype, offset = node["dtype"], x.get("offset", 0)
    viewed, expanded = _fresh(taken, f"{node['name']}_split"), _fresh(taken, f"{node['name']}_rep")
    assert math.prod(wide) == math.prod(final)
    return [
        new_node(viewed, "view", {"self": ref(x["name"]), "size": ones}, ones, ostride, dtype, view=True, offset=offset),
        new_node(expanded, "expand", {"self": ref(viewed), "size": wide, "implicit": False}, wide, estride, dtype,
              view=True, offset=offset),
        *_copy_then_view(node, expanded, wide, estride, taken),
    ]
