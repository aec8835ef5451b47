"""A matrix product of which only some rows, columns or batches are read, computed only there.

Each element of a product is its own dot product: row m of the first operand with column n of the
second, in batch b. Where everything that reads the product does so through one chain of views
(a select, a slice, a reshape, a permute) that keeps to a lattice of rows m0, m0 + g, ... (or of
columns, or of batches), the operands are cut to that lattice first and the product is made of
them, smaller: element for element the same dot products, so the same values. The views become one
view of the smaller product with the same shape, name and elements.

Found reading level 3's Mamba2ReturnFinalState, 2026-11-29: `einsum("bhzc,bchpn->bzhpn", ...)[:, -1]`
made all three z rows of a bmm (201 MB written) to keep the last one; so does a language model's
head applied to every position and then read at the last (`lm_head(x)[:, -1]`).

Only where the chain is the product's one reader, each view in it read by the next alone, every
view of the product's dtype, and the elements read index the product without carrying from one of
its dims into the next; else the graph stays as it is."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stitchcuda.agents.graph import (
    FLOAT_DTYPES,
    Node,
    contiguous_strides,
    is_contiguous,
    iter_refs,
    new_node,
    numel,
    ref,
    ref_name,
    rewrite_nodes,
)
from stitchcuda.agents.graph import fresh_name as _fresh

# "0" computes every product whole, however little of it is read, for A/B runs.
PICKED_PRODUCTS_ENV = "STITCHCUDA_PICKED_PRODUCTS"

# op -> (its target, first operand, second operand, bias or None); the product's dims are
# [batch,] M, N, the bias broadcast to them.
_PRODUCTS = {
    "mm": ("aten.mm.default", "self", "mat2", None),
    "addmm": ("aten.addmm.default", "mat1", "mat2", "self"),
    "bmm": ("aten.bmm.default", "self", "mat2", None),
    "baddbmm": ("aten.baddbmm.default", "batch1", "batch2", "self"),
}


@dataclass(frozen=True)
class _Pick:
    """The indices kept along one dim of the product: start, start + step, ... (count of them)."""

    start: int
    step: int
    count: int


def pick_product_rows(graph: list[Node]) -> list[Node]:
    readers_of: dict[str, list[Node]] = {}
    for n in graph:
        for src in dict.fromkeys(iter_refs(n.get("args", {}))):
            readers_of.setdefault(src, []).append(n)

    def rewrite(node: Node, nodes: dict[str, Node], readers: dict[str, int], taken: set[str]) -> tuple[list[Node], set[str]] | None:
        done = _picked(node, nodes, readers_of, taken)
        if done is not None:
            # A later product may read this one's view: it must see the view's new layout.
            nodes.update({n["name"]: n for n in done[0]})
        return done

    return rewrite_nodes(graph, rewrite)


def _picked(prod: Node, nodes: dict[str, Node], readers_of: dict[str, list[Node]], taken: set[str]) -> tuple[list[Node], set[str]] | None:
    form = _PRODUCTS.get(prod["op"])
    if form is None or prod.get("target") != form[0] or prod.get("dtype") not in FLOAT_DTYPES:
        return None
    shape = prod.get("shape")
    batched = prod["op"] in ("bmm", "baddbmm")
    if not shape or len(shape) != (3 if batched else 2) or not is_contiguous(prod):
        return None
    chain = _view_chain(prod, readers_of)
    if not chain:
        return None
    last = chain[-1]
    picks = _picks(last, shape)
    if picks is None:
        return None
    kept = [p.count for p in picks]
    if numel(kept) >= numel(shape):
        return None
    args = prod["args"]
    first, second = nodes.get(ref_name(args.get(form[1])) or ""), nodes.get(ref_name(args.get(form[2])) or "")
    bias = nodes.get(ref_name(args.get(form[3])) or "") if form[3] else None
    if first is None or second is None or (form[3] and bias is None):
        return None
    operands = [first, second] + ([bias] if bias is not None else [])
    if any(not o.get("shape") or len(o.get("stride") or []) != len(o["shape"]) for o in operands):
        return None
    new: list[Node] = []
    # The product's dims each operand carries, by the operand's own dims (None: not one of them):
    # [B,] M, K times [B,] K, N.
    first_dims: list[int | None] = [0, 1, None] if batched else [0, None]
    second_dims: list[int | None] = [0, None, 2] if batched else [None, 1]
    new_args = dict(args)
    new_args[form[1]] = ref(_cut(first, first_dims, picks, taken, new))
    new_args[form[2]] = ref(_cut(second, second_dims, picks, taken, new))
    if bias is not None:
        # Right-aligned against the product; a dim of one broadcasts and stays.
        lead = len(shape) - len(bias["shape"])
        if lead < 0:
            return None
        dims = [lead + d if size != 1 else None for d, size in enumerate(bias["shape"])]
        new_args[form[3]] = ref(_cut(bias, dims, picks, taken, new))
    what = ", ".join(f"{p.count} of {size}" for p, size in zip(picks, shape, strict=True) if p.count < size)
    new.append({**prod, "args": new_args, "shape": kept, "stride": contiguous_strides(kept), "offset": 0,
                "folded": f"only what {last['name']} reads of {prod['op']} {prod['name']} is computed ({what}): "
                          "its operands cut to those rows, columns or batches first"})
    new.append(_reread(last, prod["name"], picks, shape, kept))
    return new, {c["name"] for c in chain}


def _view_chain(prod: Node, readers_of: dict[str, list[Node]]) -> list[Node]:
    """The views from the product on, each the one reader of the one before, to the last one, whose
    readers are not views (their layouts are over the product's storage, which changes). Empty where
    that is not so, or the product has another reader."""
    chain: list[Node] = []
    cur = prod
    while len(readers := readers_of.get(cur["name"], [])) == 1 and readers[0].get("view"):
        view = readers[0]
        args = view.get("args", {})
        if ref_name(args.get("self")) != cur["name"] or sum(1 for _ in iter_refs(args)) != 1:
            return []
        if view.get("dtype") != prod["dtype"] or view.get("shape") is None \
                or len(view.get("stride") or []) != len(view["shape"]):
            return []  # (a view as another dtype counts its strides in other elements)
        chain.append(view)
        cur = view
    if any(r.get("view") for r in readers_of.get(cur["name"], [])):
        return []
    return chain


def _picks(view: Node, shape: list[int]) -> list[_Pick] | None:
    """Per dim of the row-major product: the lattice of indices `view` reads; None where its
    elements do not index the product dim by dim (an index that would carry into the next dim)."""
    rm = contiguous_strides(shape)

    def coords(value: int) -> list[int]:
        c = []
        for s in rm:
            q, value = divmod(value, s)
            c.append(q)
        return c

    offset = int(view.get("offset") or 0)
    if offset < 0 or any(s < 0 for s in view["stride"]):
        return None
    start = coords(offset)
    steps = [(size, coords(s)) for size, s in zip(view["shape"], view["stride"], strict=True) if size > 1]
    picks = []
    for d, size in enumerate(shape):
        moves = [(n, st[d]) for n, st in steps if st[d]]
        end = start[d] + sum((n - 1) * m for n, m in moves)
        if start[d] >= size or end >= size:
            return None
        step = math.gcd(*(m for _, m in moves)) if moves else 1
        picks.append(_Pick(start[d], step, (end - start[d]) // step + 1))
    return picks


def _cut(src: Node, dims: list[int | None], picks: list[_Pick], taken: set[str], new: list[Node]) -> str:
    """`src` cut along each of its dims that is one of the product's (dims[d]) to that dim's pick:
    views of it (added to `new`), the last one's name returned."""
    cur = src
    for d, pd in enumerate(dims):
        if pd is None or picks[pd].count == src["shape"][d]:
            continue
        for n in _pick_views(cur, d, picks[pd], taken):
            new.append(n)
            cur = n
    return cur["name"]


def _pick_views(src: Node, d: int, pick: _Pick, taken: set[str]) -> list[Node]:
    """Views of `src` keeping `pick` along dim d. A stepped pick splits the dim and selects in it
    where the step divides it (the forms a batch dim is followed through); else one strided slice."""
    shape, stride, offset = list(src["shape"]), list(src["stride"]), int(src.get("offset") or 0)
    size, s = shape[d], stride[d]
    base = src["name"].replace(".", "_")

    def view(op: str, args: dict[str, Any], vshape: list[int], vstride: list[int], voffset: int, target: str) -> Node:
        return new_node(_fresh(taken, f"{base}_{op}"), op, args, vshape, vstride, src["dtype"], view=True,
                        offset=voffset, target=target)

    def sliced(from_: Node, start: int, count: int, step: int) -> Node:
        fshape, fstride, foff = from_["shape"], from_["stride"], int(from_.get("offset") or 0)
        return view("slice", {"self": ref(from_["name"]), "dim": d, "start": start,
                              "end": start + (count - 1) * step + 1, "step": step},
                    [*fshape[:d], count, *fshape[d + 1:]], [*fstride[:d], fstride[d] * step, *fstride[d + 1:]],
                    foff + start * fstride[d], "aten.slice.Tensor")

    if pick.count == 1 or pick.step == 1:
        return [sliced(src, pick.start, pick.count, 1)]
    g = pick.step
    if size % g:
        return [sliced(src, pick.start, pick.count, g)]
    split_shape = [*shape[:d], size // g, g, *shape[d + 1:]]
    split = view("view", {"self": ref(src["name"]), "size": split_shape}, split_shape,
                 [*stride[:d], s * g, s, *stride[d + 1:]], offset, "aten.view.default")
    r, q = pick.start % g, pick.start // g
    sel_shape = [*shape[:d], size // g, *shape[d + 1:]]
    sel = view("select", {"self": ref(split["name"]), "dim": d + 1, "index": r}, sel_shape,
               [*stride[:d], s * g, *stride[d + 1:]], offset + r * s, "aten.select.int")
    if pick.count == size // g:
        return [split, sel]
    return [split, sel, sliced(sel, q, pick.count, 1)]


def _reread(view: Node, prod: str, picks: list[_Pick], shape: list[int], kept: list[int]) -> Node:
    """`view` (same name, shape and elements) as one view of the cut product: each of its steps
    along a product dim in that dim's picks (step 1 now), from the cut product's first element."""
    rm, rm_kept = contiguous_strides(shape), contiguous_strides(kept)
    strides = []
    for size, s in zip(view["shape"], view["stride"], strict=True):
        if size == 1:
            strides.append(1)
            continue
        moved = 0
        for d, unit in enumerate(rm):
            q, s = divmod(s, unit)
            moved += (q // picks[d].step) * rm_kept[d]
        strides.append(moved)
    vshape = list(view["shape"])
    base = {"name": view["name"], "view": True, "shape": vshape, "stride": strides, "offset": 0, "dtype": view["dtype"]}
    if numel(vshape) == numel(kept) and is_contiguous(base):
        return {**base, "op": "view", "target": "aten.view.default", "args": {"self": ref(prod), "size": vshape}}
    return {**base, "op": "as_strided", "target": "aten.as_strided.default",
            "args": {"self": ref(prod), "size": vshape, "stride": strides, "storage_offset": 0}}
