"""Boolean-mask reads whose shape never matters, traced as fixed-shape where() math.

`b[m]` with a boolean mask has as many elements as `m` has True values, a shape no trace on fake
tensors can know (aten.nonzero). Two idioms users write read it only to write it back through the
same mask, or to reduce it to a number:

    distance[mask] = dist[mask]      # PointNet++'s farthest point sampling
    l[mask] -= 1                     # C51's projection: read, modify, write back
    loss[valid].mean()               # a loss over the valid elements only

Each has a value of fixed shape: `torch.where(mask, dist, distance)`, `l - mask` (as the type it
is), `where(valid, loss, 0).sum() / valid.sum()`. While the trace runs a second time (graph._trace,
after the first stopped on aten.nonzero), `MaskedReads` hands out a `Masked` in place of such a
read: the whole tensor with its mask beside it. Pointwise methods and arithmetic with numbers (or
with another read through the same mask) keep it a `Masked`; `.sum()` and `.mean()` over every
element, and a write back through the same mask object, turn it into tensors again. Anything else
done with it (its shape, a function of torch's, another mask) raises, and the trace keeps the
first error, so nothing is ever computed over elements the mask left out.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class NotMaskedIdiom(TypeError):
    """A masked read used in a way whose value depends on how many elements it has."""


def _is_mask_of(index: Any, t: torch.Tensor) -> bool:
    return (isinstance(index, torch.Tensor) and index.dtype == torch.bool and index.dim() >= 1
            and tuple(index.shape) == tuple(t.shape[:index.dim()]))


class Masked:
    """`values[mask]` kept as the whole of `values` and `mask` (a read with every element)."""

    def __init__(self, values: torch.Tensor, mask: torch.Tensor):
        self.values, self.mask = values, mask

    def _full_mask(self) -> torch.Tensor:
        extra = self.values.dim() - self.mask.dim()
        return self.mask.reshape(*self.mask.shape, *([1] * extra)).expand(self.values.shape)

    def _with(self, values: Any) -> Masked:
        if not isinstance(values, torch.Tensor) or tuple(values.shape) != tuple(self.values.shape):
            raise NotMaskedIdiom("a masked read combined into another shape")
        return Masked(values, self.mask)

    def _operand(self, other: Any) -> Any:
        if isinstance(other, Masked):
            # (the same mask over a tensor of another shape has its count of elements per True, not this one's)
            if other.mask is not self.mask or tuple(other.values.shape) != tuple(self.values.shape):
                raise NotMaskedIdiom("two reads through different masks, or of different shapes, combined")
            return other.values
        if other is None or isinstance(other, bool | int | float | torch.dtype | torch.device | str) \
                or (isinstance(other, torch.Tensor) and other.dim() == 0):
            return other
        raise NotMaskedIdiom(f"a masked read combined with a {type(other).__name__} of another shape")

    # Reductions over every element: the elements the mask leaves out count as nothing.
    def sum(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if args or kwargs.keys() - {"dtype"}:
            raise NotMaskedIdiom("a masked read summed over some dims")
        return torch.where(self._full_mask(), self.values, 0).sum(**kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if args or kwargs or not self.values.is_floating_point():
            raise NotMaskedIdiom("a masked read averaged over some dims, or of a type mean refuses")
        # In float32 at least, as PyTorch accumulates a half mean: a count past 2048 is not exact in
        # fp16, past 65504 not finite.
        wide = torch.promote_types(self.values.dtype, torch.float32)
        total = torch.where(self._full_mask(), self.values, 0).sum(dtype=wide)
        return (total / self._full_mask().sum().to(wide)).to(self.values.dtype)

    def __getattr__(self, name: str) -> Any:
        if name in _POINTWISE_METHODS:
            method = getattr(self.values, name)
            return lambda *args, **kwargs: self._with(method(*[self._operand(a) for a in args],
                                                             **{k: self._operand(v) for k, v in kwargs.items()}))
        raise NotMaskedIdiom(f"a masked read's .{name}")

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotMaskedIdiom(f"a masked read passed to {getattr(func, '__name__', func)}")

    def __bool__(self) -> bool:
        raise NotMaskedIdiom("a masked read's truth value")


# Methods whose result has the tensor's own shape, element by element.
_POINTWISE_METHODS = frozenset({
    "abs", "neg", "exp", "log", "log1p", "sqrt", "rsqrt", "square", "sigmoid", "tanh", "relu", "float", "double",
    "half", "bfloat16", "to", "clamp", "clamp_min", "clamp_max", "pow", "sign", "floor", "ceil", "round", "detach",
    "clone", "contiguous", "long", "int", "bool",
})


def _binary(op: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[[Masked, Any], Masked]:
    def apply(self: Masked, other: Any) -> Masked:
        x = self._operand(other)
        return self._with(op(x, self.values) if reflected else op(self.values, x))
    return apply


for _name, _op in {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
                   "floordiv": operator.floordiv, "pow": operator.pow, "mod": operator.mod}.items():
    setattr(Masked, f"__{_name}__", _binary(_op))
    setattr(Masked, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(Masked, f"__i{_name}__", _binary(_op))  # (out of place: the write back stores it)
for _name, _op in {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
                   "ge": operator.ge}.items():
    setattr(Masked, f"__{_name}__", _binary(_op))
Masked.__hash__ = None  # type: ignore[assignment]
Masked.__neg__ = lambda self: self._with(-self.values)  # type: ignore[attr-defined]
Masked.__abs__ = lambda self: self._with(self.values.abs())  # type: ignore[attr-defined]


class MaskedReads(TorchFunctionMode):
    """Reads through a boolean mask as `Masked`; writes of a `Masked` through its own mask as where()."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ and len(args) == 2 and _is_mask_of(args[1], args[0]):
            # A copy, as the read is: the tensor may be written before the read is used (a swap
            # `a[m], b[m] = b[m], a[m]`, or the write back itself).
            return Masked(args[0].clone(), args[1])
        if func is torch.Tensor.__setitem__ and len(args) == 3 and isinstance(args[2], Masked):
            target, mask, value = args
            if value.mask is not mask or tuple(value.values.shape) != tuple(target.shape) \
                    or value.values.dtype != target.dtype:  # (index_put_ refuses another dtype)
                raise NotMaskedIdiom("a masked read written back through another mask, or into another shape or type")
            # (this mode is off while its own handler runs: these calls trace as they are)
            target.copy_(torch.where(value._full_mask(), value.values, target))
            return None
        return func(*args, **kwargs)
