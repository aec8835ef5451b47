"""Whether a candidate's error is the reference's own variation taken away: an estimate that smooths.

An estimate that replaces an output by its average along some axis (attention taken as uniform, the
mean of V's rows, where the scores are small), or copies a few computed rows over their neighbours,
errs by the output's variation along that axis with the sign reversed (an average: all of it; rows
copied over L/16 neighbours: 15/16 of it, plus an independent copy). Rounding errs independently of
it: TF32 operands, another order of a sum, bf16 where the reference rounds too. So the slope of the
error regressed on the reference's variation along each axis says which: near -1 is work skipped,
near 0 is rounding. The regression counts where its correlation is negative past chance (SIGNIFICANCE
standard errors of a correlation of noise, 1/sqrt(n)), not past a fixed correlation: noise added on
top lowers the correlation and leaves the slope (a red-team review, 2026-12-04: a mean of V plus noise
the size of its error, and rows copied, both at correlation -0.7, passed a -0.9 cut; the mean of V
alone had passed every set before any of it)."""

from __future__ import annotations

import math
import secrets
from typing import Any

import torch

# Elements of one output looked at (a run of whole rows along its first axis, where larger, starting
# at a row drawn from the OS: a fixed window would tell a candidate where to be exact): enough for a
# correlation that noise puts near 1/sqrt(n), cheap beside a forward.
MAX_ELEMENTS = 1 << 24
# Standard errors past zero a correlation must reach to count (noise's is 1/sqrt(n)).
SIGNIFICANCE = 8.0
# Outputs smaller than this say too little: a correlation of noise reaches 1/sqrt(n).
MIN_ELEMENTS = 256
# The variation along an axis must be past fp32's rounding of the output to count: a reference
# output constant along an axis but for rounding has nothing there to smooth away.
MIN_VARIATION = 1e-5


def slope(ref: list[Any], got: list[Any], *, significance: float = SIGNIFICANCE) -> float | None:
    """The most negative slope, over the floating outputs and their axes, of the candidate's error
    (got - ref) regressed on the reference's variation along the axis (ref minus its mean there),
    among the regressions whose correlation is negative by `significance` standard errors of noise's
    (1/sqrt(n)) or more; None where none is."""
    best: float | None = None
    for r, g in zip(ref, got, strict=False):
        if not (isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor) and r.is_floating_point()
                and g.shape == r.shape and r.dim() >= 1 and r.numel() >= MIN_ELEMENTS):
            continue
        if r.numel() > MAX_ELEMENTS:
            if r.dim() < 2 or r.shape[0] < 2:
                continue
            rows = max(2, MAX_ELEMENTS // (r.numel() // r.shape[0]))
            start = secrets.randbelow(r.shape[0] - rows + 1) if rows < r.shape[0] else 0
            r, g = r[start : start + rows], g[start : start + rows]
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
            if ev / math.sqrt(vv * ee) * math.sqrt(rd.numel()) <= -significance:
                b = ev / vv
                best = b if best is None else min(best, b)
    return best
