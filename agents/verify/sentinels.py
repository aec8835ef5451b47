"""Integer inputs at the values the reference's own ops give a meaning of their own: the
`ignore_index` of a negative log-likelihood (cross_entropy's and nll_loss's, -100 unless set).

A user's targets hold it (padding, masked tokens); random draws never do, so a candidate that
skipped the ignore test, or counted ignored rows in a mean's divisor, passed every set (a red-team
review). The reference's first call shows which inputs reach such an op as its target, and with
which value; one more set then has that value in a share of their elements. Only a value the
reference's op is documented to take is written: an index it would refuse (a device-side assert on
a GPU) is never drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops with a target whose `ignore_index` value is skipped (as dispatched: cross_entropy and
# nll_loss reach the dispatcher as these).
IGNORING_OPS = frozenset({"nll_loss_forward", "nll_loss2d_forward"})
SHARE = 8  # one element in SHARE of each such input (at least one, never all) takes the value


def _named(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by the names the op's schema gives them."""
    named = dict(kwargs or {})
    for arg, value in zip(func._schema.arguments, args, strict=False):
        named[arg.name] = value
    return named


class _Finder(TorchDispatchMode):
    def __init__(self, storages: dict[int, int]):
        super().__init__()
        self.storages = storages  # an input's storage address -> its position in the call's inputs
        self.found: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name().split("::")[-1].split(".")[0] in IGNORING_OPS:
            named = _named(func, args, kwargs or {})
            target, ignore = named.get("target"), named.get("ignore_index", -100)
            if isinstance(target, torch.Tensor) and type(ignore) is int:
                where = self.storages.get(target.untyped_storage().data_ptr())
                if where is not None:
                    self.found.setdefault(where, ignore)
        return func(*args, **(kwargs or {}))


def find(call: Callable[[list[Any]], Any], args: list[Any]) -> tuple[Any, dict[int, int]]:
    """`call(args)`'s result, and {input position: value} for each integer input that reached an op
    of IGNORING_OPS as its target (itself or a view of it: a target computed from it is not followed)."""
    storages = {a.untyped_storage().data_ptr(): i for i, a in enumerate(args)
                if isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex()
                and a.dtype != torch.bool and a.numel()}
    if not storages:
        return call(args), {}
    finder = _Finder(storages)
    with finder:
        out = call(args)
    return out, finder.found


def apply_(args: list[Any], found: dict[int, int], gen: torch.Generator) -> list[Any]:
    """The set with one element in SHARE of each found input (at least one, never all) set to its
    value, at places drawn from `gen`, in place."""
    for i, value in found.items():
        a = args[i]
        if not isinstance(a, torch.Tensor) or a.numel() == 0:
            continue
        flat = a.view(-1) if a.is_contiguous() else None
        n = a.numel()
        if n < 2:
            continue  # (every element ignored is another question: a mean over nothing)
        k = max(1, n // SHARE)
        places = torch.randperm(n, generator=gen, device=gen.device)[:k].to(a.device)
        if flat is not None:
            flat[places] = value
        else:
            copy = a.reshape(-1).clone()
            copy[places] = value
            a.copy_(copy.view(a.shape))
    return args
