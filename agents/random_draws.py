"""Random tensors a forward draws (torch.randn, rand, randint and their _like forms, and normal_,
uniform_ and exponential_ fills of a fresh tensor) as inputs.

A module that draws random numbers in forward (an initial state, noise for a reparameterisation)
computes on values no kernel can reproduce bit for bit except through PyTorch's own generator. So
the draw stays PyTorch's: the node becomes an input of kind "draw", which ModelNew makes with the
same call at the traced shape, in trace order, on the inputs' device, before the kernels run. The
generator's stream is then the reference's (the Verifier seeds both alike), and the kernels do the
arithmetic. Draws that take a generator, or whose shape is not fixed by the trace, stay unsupported.

A training-mode dropout traces as bernoulli(keep) over an expanded empty tensor, but eager PyTorch
draws its mask inside aten.native_dropout (on CUDA a fused Philox kernel whose stream is not
bernoulli_'s): the mask is drawn the same way, as native_dropout's mask of a tensor of ones of the
same shape and dtype (its draws depend on those and the generator, never on the values), and the
kernels apply its bool mask. The Verifier's checks accept native_dropout only over ones (torch_ops.DROPOUT_MASK).

bernoulli(keep) over any other tensor is a bernoulli_ fill of a fresh one of its shape (ATen's
bernoulli(t, p) is empty_like(t).bernoulli_(p): t's values are never read), and eager PyTorch draws
it so: feature dropout (F.dropout1d/2d/3d: ATen's make_feature_noise, then
bernoulli_(1 - p)), stochastic depth (timm's drop_path: x.new_empty((B, 1, ...)).bernoulli_(keep)),
and an in-place or alpha dropout (nn.Dropout(inplace=True), nn.AlphaDropout), which eager draws by
bernoulli_ over an empty_like of the input and the trace runs so (eager_dropouts). Drawn as
native_dropout's mask, their numbers on CUDA would not be the reference's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stitchcuda.agents.graph import Node, contiguous_strides

# op -> the torch function ModelNew calls (the _like forms draw the same numbers at the same shape).
DRAWS = {"randn": "randn", "randn_like": "randn", "rand": "rand", "rand_like": "rand",
         "randint": "randint", "randint_like": "randint"}  # fmt: skip
# In-place fills of a fresh tensor (x.new_empty(...).normal_(m, s), torch.empty_like(x).uniform_(a, b),
# F.gumbel_softmax's -empty_like(x).exponential_().log()): traced functional, over an empty tensor
# whose values they never read; ModelNew makes the same fill of an empty tensor of the traced shape.
FILLS = {"normal_functional": ("normal_", ("mean", "std")), "uniform": ("uniform_", ("from", "to")),
         "exponential": ("exponential_", ("lambd",))}
FLOAT_DRAWS = {"randn", "rand", *(fill for fill, _ in FILLS.values())}
# Allocations: a 0-d one expanded is what a training-mode dropout's bernoulli traces over.
FRESH = {"empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided"}


def draws_as_inputs(graph: Sequence[Node]) -> list[Node]:
    """The graph with every supported draw turned into an input node of kind "draw"."""
    out: list[Node] = []
    by_name = {n["name"]: n for n in graph}
    for node in graph:
        call = _draw_call(node, by_name)
        if call is None:
            out.append(node)
            continue
        # A mask stays native_dropout's bool: the kernels read a byte an element, and no conversion
        # kernel runs (on level 2's 83, on the H200, its float copy took 310 us of 2.6 ms).
        dtype = "bool" if call["fn"] == "dropout_mask" else node["dtype"]
        out.append({"name": node["name"], "op": "input", "kind": "draw", "shape": list(node["shape"]),
                    "dtype": dtype, "stride": list(node["stride"]), "offset": 0, "draw": call,
                    "target": node.get("target")})
    return out


def _draw_call(node: Node, by_name: dict[str, Node]) -> dict[str, Any] | None:
    args = node.get("args") or {}
    if node["op"] == "bernoulli" and node.get("target") == "aten.bernoulli.p":
        keep = args.get("p")
        if not isinstance(keep, float | int) or isinstance(keep, bool) or not 0.0 < keep < 1.0 \
                or args.get("generator") is not None or node.get("shape") is None \
                or not node["dtype"].startswith(("float", "bfloat")):
            return None
        if not _expanded_scalar(node, by_name):
            # bernoulli(t, keep) never reads t's values, but t.bernoulli_(keep) draws in t's memory
            # order (the trace's result is contiguous either way): t must be laid out as ModelNew's
            # fresh tensor is, contiguous, for the numbers to land where eager put them.
            src = _source(node, by_name)
            if src is None or list(src.get("shape") or []) != list(node["shape"]) or src.get("offset", 0) != 0 \
                    or list(src.get("stride") or []) != contiguous_strides(node["shape"]) \
                    or node.get("offset", 0) != 0 or list(node["stride"]) != contiguous_strides(node["shape"]):
                return None
            return {"fn": "bernoulli_", "args": [float(keep)]}
        # The dropout probability whose 1 - p is `keep` exactly, as native_dropout computes it.
        p = float(f"{1.0 - keep:.15g}")
        # `of`: the dtype dropout drew over (ATen's fused kernel vectorises by element size, so the
        # mask of a bf16 tensor is not that of an fp32 one).
        return {"fn": "dropout_mask", "p": p if 1.0 - p == keep else 1.0 - float(keep), "of": node["dtype"]}
    fn = DRAWS.get(node["op"]) or (FILLS[node["op"]][0] if node["op"] in FILLS else None)
    if fn is None or node.get("shape") is None or args.get("generator") is not None:
        return None
    if node.get("offset", 0) != 0 or list(node["stride"]) != contiguous_strides(node["shape"]):
        return None
    if fn in FLOAT_DRAWS and not node["dtype"].startswith(("float", "bfloat")):
        return None
    call: dict[str, Any] = {"fn": fn}
    if node["op"] in FILLS:
        values = [args.get(k) for k in FILLS[node["op"]][1]]
        if not all(isinstance(v, float | int) and not isinstance(v, bool) for v in values):
            return None
        call["args"] = [float(v) for v in values]
    if fn == "randint":
        low, high = args.get("low", 0), args.get("high")
        if not isinstance(low, int) or not isinstance(high, int):
            return None
        call.update(low=low, high=high)
    return call


def _source(node: Node, by_name: dict[str, Node]) -> Node | None:
    ref = (node.get("args") or {}).get("self")
    return by_name.get(ref["ref"]) if isinstance(ref, dict) and "ref" in ref else None


def _expanded_scalar(node: Node, by_name: dict[str, Node]) -> bool:
    """Whether the bernoulli's self is a 0-d allocation expanded to the draw's shape: how a
    training-mode dropout traces (its mask drawn by native_dropout in eager PyTorch)."""
    src = _source(node, by_name)
    if src is None or src["op"] != "expand":
        return False
    inner = _source(src, by_name)
    return inner is not None and inner["op"] in FRESH and list(inner.get("shape") or []) == []


def render(node: Node, device: str) -> str:
    """The call ModelNew makes for a draw input: the traced shape and dtype, on `device`."""
    call = node["draw"]
    shape = tuple(node["shape"])
    if call["fn"] == "dropout_mask":
        ones = f"torch.ones({shape!r}, dtype=torch.{call.get('of', 'float32')}, device={device})"
        return f"torch.ops.aten.native_dropout({ones}, {call['p']!r}, True)[1]"
    if "args" in call:  # a fill of an empty tensor (FILLS, and bernoulli_)
        empty = f"torch.empty({shape!r}, dtype=torch.{node['dtype']}, device={device})"
        return f"{empty}.{call['fn']}({', '.join(repr(v) for v in call['args'])})"
    bounds = f"{call['low']}, {call['high']}, " if call["fn"] == "randint" else ""
    return f"torch.{call['fn']}({bounds}{shape!r}, dtype=torch.{node['dtype']}, device={device})"

