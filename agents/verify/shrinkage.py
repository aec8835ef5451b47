"""Whether a candidate's error is the reference's own variation taken away: an estimate that smooths.

An estimate that replaces an output by its average along some axis (attention taken as uniform, the
mean of V's rows, where the scores are small; a product by its rank-1 mean structure) errs by exactly
the output's variation along that axis, with the sign reversed. Rounding errs independently of it:
TF32 operands, another order of a sum, bf16 where the reference rounds too. So the regression of the
error on the reference's variation along each axis says which: a slope near -1 that explains nearly
all the error is work skipped, at any size of error, where rounding's slope is near 0 (a red-team
candidate, the mean of V behind a spot check of 16 rows, passed every set on the CPU, 2026-12-04)."""

from __future__ import annotations

import math
from typing import Any

import torch

# Elements of one output looked at (along its first axis, where larger): enough for a correlation
# that noise puts near 1/sqrt(n), cheap beside a forward.
MAX_ELEMENTS = 1 << 24
# Outputs smaller than this say too little: a correlation of noise reaches 1/sqrt(n).
MIN_ELEMENTS = 256
# The variation along an axis must be past fp32's rounding of the output to count: a reference
# output constant along an axis but for rounding has nothing there to smooth away.
MIN_VARIATION = 1e-5


def slope(ref: list[Any], got: list[Any], *, min_correlation: float = 0.9) -> float | None:
    """The most negative slope, over the floating outputs and their axes, of the candidate's error
    (got - ref) regressed on the reference's variation along the axis (ref minus its mean there),
    among the regressions whose correlation is at most -min_correlation; None where none is."""
    best: float | None = None
    for r, g in zip(ref, got, strict=False):
        if not (isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor) and r.is_floating_point()
                and g.shape == r.shape and r.dim() >= 1 and r.numel() >= MIN_ELEMENTS):
            continue
        if r.numel() > MAX_ELEMENTS:
            if r.dim() < 2 or r.shape[0] < 2:
                continue
            rows = max(1, MAX_ELEMENTS // (r.numel() // r.shape[0]))
            r, g = r[:rows], g[:rows]
        rd, e = r.detach().double(), (g.detach().to(r.device).double() - r.detach().double())
        fin = rd.isfinite() & e.isfinite()
        if not bool(fin.all()):
            continue
        total = float((rd * rd).sum())
        ee = float((e * e).sum())
        if total <= 0 or ee <= 0:
            continue
        for axis in range(rd.dim()):
            if rd.shape[axis] < 2:
                continue
            var = rd - rd.mean(dim=axis, keepdim=True)
            vv = float((var * var).sum())
            if vv <= (MIN_VARIATION**2) * total:
                continue
            ev = float((e * var).sum())
            if ev / math.sqrt(vv * ee) <= -min_correlation:
                b = ev / vv
                best = b if best is None else min(best, b)
    return best
