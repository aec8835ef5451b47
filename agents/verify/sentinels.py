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
# comparison (a mask of the ignored rows: a bool, not followed further) and a copy (followed
# further, whatever its dtype: a float copy made an index again is still the target). Anything else
# (an index into a gather, an embedding, one_hot, arithmetic) would meet the value it was never drawn
# with: on a GPU an index out of range is a device-side assert, which ends the process.
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
SAFE_OPS = COMPARISONS | frozenset({"clone", "_to_copy", "contiguous", "detach", "alias", "lift_fresh",
                                    "lift_fresh_copy"})


def _base(func: Any) -> str:
    return func.name().split("::")[-1].split(".")[0]


def _ptr(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (NotImplementedError, RuntimeError):  # (a sparse or nested tensor has no one storage)
        return None


class _Finder(TorchDispatchMode):
    """Follows each integer input through the call (its views and copies, by storage; every followed
    tensor is kept alive, so no freed address is taken for another's): where it reaches an op of
    IGNORING_OPS as the target, that op's ignore value is found; where it reaches any op other than
    those, a view or SAFE_OPS, or two such ops with different values, it is unsafe to give one."""

    def __init__(self, inputs: dict[int, torch.Tensor]):
        super().__init__()
        self.followed = {_ptr(a): i for i, a in inputs.items()}  # a storage address -> its input
        self.alive: list[torch.Tensor] = list(inputs.values())
        self.found: dict[int, int] = {}
        self.unsafe: set[int] = set()

    def _reached(self, values: Any) -> set[int]:
        return {self.followed[p] for t in tree_leaves(values)
                if isinstance(t, torch.Tensor) and (p := _ptr(t)) is not None and p in self.followed}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _base(func)
        reached = self._reached((args, kwargs))
        if reached and name in IGNORING_OPS:
            named = _named(func, args, kwargs)
            target, ignore = named.get("target"), named.get("ignore_index", -100)
            where = next(iter(self._reached(target)), None)
            if where is not None and type(ignore) is int:
                if self.found.setdefault(where, ignore) != ignore:
                    self.unsafe.add(where)  # (two ops ignoring different values: each refuses the other's)
            self.unsafe |= reached - ({where} if where is not None else set())
        elif reached and not func.is_view and name not in SAFE_OPS:
            self.unsafe |= reached
        out = func(*args, **kwargs)
        if reached and name not in IGNORING_OPS and name not in COMPARISONS:
            for o in tree_leaves(out):
                if isinstance(o, torch.Tensor) and (p := _ptr(o)) is not None:
                    self.followed.setdefault(p, min(reached))
                    self.alive.append(o)
        return out


def find(call: Callable[[list[Any]], Any], args: list[Any]) -> tuple[Any, dict[int, int]]:
    """`call(args)`'s result, and {input position: value} for each integer input that reached an op of
    IGNORING_OPS as its target (itself, a view or a copy of it), and nothing that would read the value
    as an index (SAFE_OPS), with a value its own dtype holds."""
    inputs = {i: a for i, a in enumerate(args)
              if isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex()
              and a.dtype != torch.bool and a.numel() and _ptr(a) is not None}
    if not inputs:
        return call(args), {}
    finder = _Finder(inputs)
    with finder:
        out = call(args)
    found = {}
    for i, v in finder.found.items():
        info = torch.iinfo(args[i].dtype)
        if i not in finder.unsafe and info.min <= v <= info.max:
            found[i] = v
    return out, found


def apply_(args: list[Any], found: dict[int, int], gen: torch.Generator) -> list[Any]:
    """The set with about one element in SHARE of each found input (at least one, never all) set to
    its value, at places drawn from `gen`, in place."""
    for i, value in found.items():
        a = args[i]
        if not isinstance(a, torch.Tensor) or a.numel() == 0:
            continue
        flat = a.view(-1) if a.is_contiguous() else None
        n = a.numel()
        if n < 2:
            continue  # (every element ignored is another question: a mean over nothing)
        # About one in SHARE, the count itself drawn (between half and twice that), so no candidate
        # can key on it.
        lo = max(1, n // (2 * SHARE))
        k = min(n - 1, lo + int(torch.randint(0, 3 * lo + 1, (1,), generator=gen, device=gen.device)))
        places = torch.randperm(n, generator=gen, device=gen.device)[:k].to(a.device)
        if flat is not None:
            flat[places] = value
        else:
            copy = a.reshape(-1).clone()
            copy[places] = value
            a.copy_(copy.view(a.shape))
    return args
