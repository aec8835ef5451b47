"""A tensor made empty and then filled by copies into slices of it, as one layout op.

Circular padding traces this way (PyTorch's _pad_circular, for F.pad(mode="circular") and
Conv2d(padding_mode="circular")): new_empty, the input copied into the middle, then, dim by dim, the
borders copied from the other side of the tensor itself. No emitter takes new_empty or copy_ (an
in-place write into a view), so such a module was unsupported. Here every copy is a box of the new
tensor and a same-sized box of its source (the input, or the new tensor as the copies before it left
it), so the value at an element is found by walking the copies from the last: inside a copy from the
input it is read there; inside a copy from the tensor itself the walk goes on from the source's
element with the copies before. The result is one node, `assembled`, which emit_layout computes
element by element (each element written once, no write-after-write between kernels).

Taken only where the pattern is whole: the tensor is read by nothing but the copies until the last of
them, each copy's destination and source are slices of step 1, no copy's result is read, and every
copy covers the first (batch) dim whole, so the op is per sample."""

from __future__ import annotations

from stitchcuda.agents.graph import Node, contiguous_strides, iter_refs, ref, ref_name, rewrite_nodes

_EMPTY = ("new_empty", "empty", "empty_like")


def assemble_slice_copies(graph: list[Node]) -> list[Node]:
    nodes = {n["name"]: n for n in graph}
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(graph):
        for name in set(iter_refs(n.get("args", {}))):
            readers.setdefault(name, []).append(k)

    def rewrite(node: Node, *_: object) -> tuple[list[Node], set[str]] | None:
        if node["op"] not in _EMPTY or node.get("view") or not node.get("shape"):
            return None
        found = _assembly(graph, nodes, readers, node)
        return None if found is None else ([found[0]], found[1])

    return rewrite_nodes(graph, rewrite)


def _box(nodes: dict[str, Node], name: str) -> tuple[str, list[tuple[int, int]]] | None:
    """(root, per-dim [start, end) in the root) of a chain of step-1 slices; None for other views."""
    node = nodes[name]
    chain = []
    while node.get("view"):
        if node["op"] != "slice" or node["args"].get("step", 1) != 1:
            return None
        chain.append(node)
        node = nodes.get(ref_name(node["args"].get("self")) or "")
        if node is None:
            return None
    box = [(0, int(n)) for n in node["shape"]]
    for s in reversed(chain):
        dim = s["args"]["dim"] % len(box)
        lo, hi = box[dim]
        start, end = s["args"].get("start") or 0, s["args"].get("end")
        size = hi - lo
        start = max(0, min(size, start + size if start < 0 else start))
        end = size if end is None else max(0, min(size, end + size if end < 0 else end))
        box[dim] = (lo + start, lo + max(start, end))
    return node["name"], box


def _assembly(graph: list[Node], nodes: dict[str, Node], readers: dict[str, list[int]],
              empty: Node) -> tuple[Node, set[str]] | None:
    name, shape = empty["name"], [int(n) for n in empty["shape"]]
    # The views of the new tensor (slice chains) and the copies into them, in graph order.
    views = {name}
    copies: list[dict] = []
    gone: set[str] = set()
    sources: list[str] = []
    last = -1
    for k, n in enumerate(graph):
        refs = set(iter_refs(n.get("args", {})))
        if not refs & views:
            continue
        if n.get("view"):
            if n["op"] != "slice" or ref_name(n["args"].get("self")) not in views:
                return None  # another kind of view of it
            views.add(n["name"])
            gone.add(n["name"])
            continue
        if n["op"] != "copy_":
            break  # the first reader of the finished tensor
        dst, src = ref_name(n["args"].get("self")), ref_name(n["args"].get("src"))
        if dst not in views or dst == name or src is None or readers.get(n["name"]):
            return None
        into, frm = _box(nodes, dst), _box(nodes, src)
        if into is None or frm is None or into[0] != name:
            return None
        (_, dbox), (root, sbox) = into, frm
        if [b - a for a, b in dbox] != [b - a for a, b in sbox] or dbox[0] != (0, shape[0]) or sbox[0][0] != 0:
            return None  # broadcasting copies, or one that does not cover the batch whole
        if root != name:
            held = nodes[root].get("shape") or []
            if len(held) != len(shape) or held[0] != shape[0] or nodes[root]["dtype"] != empty["dtype"]:
                return None
            if root not in sources:
                sources.append(root)
        view = src
        while view != root:  # the views of the source made for this copy
            gone.add(view)
            view = ref_name(nodes[view]["args"].get("self"))
        copies.append({"box": [list(b) for b in dbox], "source": sources.index(root) if root != name else -1,
                       "shift": [s[0] - d[0] for s, d in zip(sbox, dbox, strict=True)]})
        gone.add(n["name"])
        last = k
    if not copies or any(readers.get(v) and max(readers[v]) > last for v in views - {name}):
        return None  # a view of it read after the copies: its value would be the assembled one's
    # Source views made only for the copies go with them (a view read elsewhere too stays).
    used = {v for v in gone if any(graph[k]["name"] not in gone for k in readers.get(v, []))}
    gone -= used
    node = {"name": name, "op": "assembled", "target": "stitchcuda.assembled",
            "args": {"sources": [ref(s) for s in sources], "copies": copies},
            "view": False, "shape": shape, "dtype": empty["dtype"], "stride": contiguous_strides(shape), "offset": 0}
    return node, gone
