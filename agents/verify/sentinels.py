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
from torch.utils._pytree import tree_leaves

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


# What a target may reach besides IGNORING_OPS and views of it, where its ignore value is safe: a
# comparison (a mask of the ignored rows) and a copy (itself followed further). Anything else (an
# index into a gather, an embedding, one_hot, arithmetic) would meet the value it was never drawn
# with: on a GPU an index out of range is a device-side assert, which ends the process.
SAFE_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "clone", "_to_copy", "contiguous", "detach", "alias",
                      "lift_fresh", "lift_fresh_copy"})


def _base(func: Any) -> str:
    return func.name().split("::")[-1].split(".")[0]


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class _Finder(TorchDispatchMode):
    """Follows each integer input through the call (its views and copies by storage): where it reaches
    an op of IGNORING_OPS as the target, that op's ignore value is found; where it reaches any op other
    than those, a view or SAFE_OPS, the input is unsafe to give that value."""

    def __init__(self, storages: dict[int, int]):
        super().__init__()
        self.followed = dict(storages)  # a storage address -> the input it holds (or was copied from)
        self.found: dict[int, int] = {}
        self.unsafe: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _base(func)
        reached = {self.followed[_ptr(t)] for t in tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor) and _ptr(t) in self.followed}
        if reached and name in IGNORING_OPS:
            named = _named(func, args, kwargs)
            target, ignore = named.get("target"), named.get("ignore_index", -100)
            where = self.followed.get(_ptr(target)) if isinstance(target, torch.Tensor) else None
            if where is not None and type(ignore) is int:
                self.found.setdefault(where, ignore)
            self.unsafe |= reached - ({where} if where is not None else set())
        elif reached and not func.is_view and name not in SAFE_OPS:
            self.unsafe |= reached
        out = func(*args, **kwargs)
        if reached and name not in IGNORING_OPS:
            for o in tree_leaves(out):
                if isinstance(o, torch.Tensor) and not o.is_floating_point() and o.dtype != torch.bool:
                    self.followed.setdefault(_ptr(o), min(reached))
        return out


def find(call: Callable[[list[Any]], Any], args: list[Any]) -> tuple[Any, dict[int, int]]:
    """`call(args)`'s result, and {input position: value} for each integer input that reached an op of
    IGNORING_OPS as its target (itself, a view or a copy of it), and nothing that would read the value
    as an index (SAFE_OPS)."""
    storages = {_ptr(a): i for i, a in enumerate(args)
                if isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex()
                and a.dtype != torch.bool and a.numel()}
    if not storages:
        return call(args), {}
    finder = _Finder(storages)
    with finder:
        out = call(args)
    return out, {i: v for i, v in finder.found.items() if i not in finder.unsafe}


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
