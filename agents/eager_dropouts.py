"""Dropouts traced as eager PyTorch draws their masks on CUDA.

A training-mode F.dropout, an in-place one (nn.Dropout(inplace=True), torch.dropout_) and
F.alpha_dropout all trace alike: bernoulli(keep) over an expanded 0-d allocation, which
random_draws renders as native_dropout's mask. Eager PyTorch draws only the first so: on CUDA a
plain dropout runs the fused native_dropout kernel, while ATen's in-place and alpha dropouts
(`_dropout_impl`) draw `empty_like(input).bernoulli_(1 - p)`, whose numbers on CUDA are not the
fused kernel's. While tracing, those calls run as that composition instead, so their trace is a
bernoulli_ fill of a tensor like the input, which random_draws renders as the same fill, followed
by ATen's own arithmetic on it (div by keep, or alpha dropout's affine terms), op for op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

# SELU's alpha: ATen's alpha_dropout constant (aten/src/ATen/native/Dropout.cpp).
ALPHA = 1.7580993408473766


def _drawn(x: torch.Tensor, p: float, *, alpha: bool, inplace: bool) -> torch.Tensor:
    # ATen's _dropout_impl for a non-feature dropout, step for step (the rounding is eager's).
    noise = torch.empty_like(x).bernoulli_(1 - p)
    if alpha:
        a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
        b = noise.add(-1).mul_(ALPHA * a).add_(ALPHA * a * p)
        noise.mul_(a)
        return (x.mul_(noise) if inplace else x.mul(noise)).add_(b)
    noise.div_(1 - p)
    return x.mul_(noise) if inplace else x.mul(noise)


def _arguments(names: tuple[str, ...], defaults: dict[str, Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    got = dict(defaults)
    got.update(zip(names, args, strict=False))
    got.update(kwargs)
    return got


# name -> (argument names in order, defaults, alpha, in place: True, False, or None = the `inplace`
# argument). The Python functionals (F.dropout, F.alpha_dropout) and the C++ ones under them.
_FUNCTIONAL = ("input", "p", "training", "inplace")
_BUILTIN = ("input", "p", "train")
_CALLS: dict[tuple[str, str], tuple[tuple[str, ...], dict[str, Any], bool, bool | None]] = {
    ("torch.nn.functional", "dropout"): (_FUNCTIONAL, {"p": 0.5, "training": True, "inplace": False}, False, None),
    ("torch.nn.functional", "alpha_dropout"): (_FUNCTIONAL, {"p": 0.5, "training": False, "inplace": False}, True, None),
    ("torch", "dropout_"): (_BUILTIN, {}, False, True),
    ("torch", "alpha_dropout"): (_BUILTIN, {}, True, False),
    ("torch", "alpha_dropout_"): (_BUILTIN, {}, True, True),
}


def _which(func: Callable) -> tuple[str, str] | None:
    name = getattr(func, "__name__", None)
    if func is getattr(torch.nn.functional, name or "", None):
        return ("torch.nn.functional", name)
    if func is getattr(torch, name or "", None) or func is getattr(torch._C._VariableFunctions, name or "", None):
        return ("torch", name)
    return None


class EagerDropouts(TorchFunctionMode):
    """Active while a module's forward is traced (graph._trace): each dropout eager draws by
    bernoulli_ runs as that draw. Everything else, and a dropout that draws nothing (eval mode,
    p of 0 or 1, an empty input), is called as it is."""

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        key = _which(func)
        spec = _CALLS.get(key) if key else None
        if spec is None:
            return func(*args, **kwargs)
        names, defaults, alpha, inplace = spec
        got = _arguments(names, defaults, args, kwargs)
        x, p = got.get("input"), got.get("p")
        train = got.get("training", got.get("train"))
        in_place = bool(got.get("inplace")) if inplace is None else inplace
        if not isinstance(x, torch.Tensor) or not isinstance(p, float | int) or isinstance(p, bool) \
                or not train or not 0 < p < 1 or x.numel() == 0 or not (alpha or in_place):
            # The fused native_dropout path (a plain dropout), or nothing drawn: as it is.
            return func(*args, **kwargs)
        return _drawn(x, float(p), alpha=alpha, inplace=in_place)
