"""Whether a candidate's outputs follow the reference's from one random draw to the next.

A loss or a mean over a large iid input barely moves between draws (a cosine loss of two 8192 x
4096 randn inputs is 1 +- 2e-4), so an estimate that stays near the draw's expectation is within
every tolerance on every random set, and a gate that tells the structured sets from iid ones (range,
moments, neighbour correlations of a 1/64 sample) sends those to an exact path (a red-team round,
2026-12-06: 1 - 0.05 x the mean cosine of 1/64 of the columns passed). An honest candidate's error
is rounding, unrelated to how the reference's outputs move between draws; such an estimate's error cancels the movement, or a part of it (a matmul as row sums
times column sums keeps the rows' and columns' share and loses their interaction's). Outputs are
compared at secret places (a candidate exact at known places and estimating elsewhere would pass a
fixed sample).
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import torch

from stitchcuda.types import Finding

TRACK_ELEMENTS = 1 << 16  # places kept per output per draw
# An error under this share of the output's norm is rounding, however little the draws move it.
TRACK_FLOOR = 1e-5
# The error's regression on the reference's movement between draws (both about their means over the
# draws, place by place): an estimate that keeps only part of what moves (a matmul's row and column
# effects, without their interaction: -0.14) or stays near what any draw gives (-0.95) has its error
# cancel that share of the movement. Rounding's error, and TF32's proportional bias (a truncating
# library's -2^-10 on positive products: -1e-3), do not; found at or below -TRACK_SLOPE and at least
# TRACK_T standard errors from zero. Noise unrelated to the movement (a float atomicAdd of a million
# partial sums, as large as a loss's movement) lands there by chance as Student's t does: with 9
# degrees of freedom (a scalar over 11 draws) about 0.15% of the time.
TRACK_SLOPE = 0.05
TRACK_T = 4.0
# Outputs of at most this many elements in all (a loss, a mean) get EXTRA_DRAWS more random sets: over
# 5 draws a scalar's slope has 3 degrees of freedom, where the t test missed a fifth of such
# estimates and found 1.4% of honest noise.
AGGREGATE_ELEMENTS = 64
EXTRA_DRAWS = 6


def aggregate(outs: list[Any]) -> bool:
    """Whether the floating outputs number at most AGGREGATE_ELEMENTS elements in all (and some)."""
    n = [o.numel() for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]
    return bool(n) and sum(n) <= AGGREGATE_ELEMENTS


class DrawTracker:
    """Samples of the reference's and the candidate's floating outputs on each random set, at places
    drawn once (in secret) per output."""

    def __init__(self) -> None:
        self._places: dict[int, torch.Tensor] = {}
        self._seed = secrets.randbits(62)
        self.draws: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _sample(self, outs: list[Any]) -> torch.Tensor | None:
        parts = []
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor) or not o.is_floating_point() or o.numel() == 0:
                continue
            flat = o.detach().reshape(-1)
            if i not in self._places:
                g = torch.Generator().manual_seed(self._seed + i)
                k = min(TRACK_ELEMENTS, flat.numel())
                self._places[i] = torch.randperm(flat.numel(), generator=g)[:k] if flat.numel() <= 1 << 24 \
                    else torch.randint(flat.numel(), (k,), generator=g)
            parts.append(flat[self._places[i].to(flat.device)].double().cpu())
        return torch.cat(parts) if parts else None

    def add(self, ref_outs: list[Any], cand_outs: list[Any]) -> None:
        """One random set both sides passed, judged against the fp32 reference itself."""
        r, c = self._sample(ref_outs), self._sample(cand_outs)
        if r is not None and c is not None and r.shape == c.shape:
            self.draws.append((r, c))


# The draws' movement must stand clear of the reference's own error (fp32 rounding, and TF32's where
# the policy allows it, against float64, on one set): where that error is at least this share of the
# movement per draw, the movement is mostly rounding, and an honest candidate's error cancels it as
# readily as an estimate's. On the H100 (2026-12-07) an honest TF32 VGG16, whose logits move 8e-6 of
# their norm between draws under TF32's 1e-4, was found to cancel 0.18 of it, and level 2's 23, whose
# mean of a group norm is 0 but for rounding, all of it.
RESOLVE_SHARE = 0.5


def own_share(tracker: DrawTracker, fp32: list[Any], exact: list[Any], policy_runs: list[list[Any]]) -> float | None:
    """The reference's own error on one set (its fp32 outputs, and each of `policy_runs`, against
    `exact`, its float64 ones), at the tracker's places, over the root mean square of its movement
    per draw; None where not measurable."""
    if not tracker.draws:
        return None
    e, r = tracker._sample(exact), tracker._sample(fp32)
    if e is None or r is None or e.shape != r.shape:
        return None
    own = float(torch.linalg.vector_norm(torch.nan_to_num(r - e)))
    for run in policy_runs:
        p = tracker._sample(run)
        if p is not None and p.shape == e.shape:
            own_p = float(torch.linalg.vector_norm(torch.nan_to_num(p - e)))
            own = max(own, own_p)
    ref = torch.stack([d for d, _ in tracker.draws])
    ref = ref[:, torch.isfinite(ref).all(dim=0)]
    moved_sq = float(((ref - ref.mean(dim=0)) ** 2).sum())
    if moved_sq == 0:
        return math.inf
    return own / math.sqrt(moved_sq / len(tracker.draws))


def findings(tracker: DrawTracker, min_draws: int = 3) -> list[Finding]:
    """A hack finding where, over at least `min_draws` random sets, the candidate's error is above
    TRACK_FLOOR of the output and cancels part of the reference's movement between draws (TRACK_SLOPE,
    TRACK_T)."""
    if len(tracker.draws) < min_draws:
        return []
    ref = torch.stack([r for r, _ in tracker.draws])
    cand = torch.stack([c for _, c in tracker.draws])
    keep = torch.isfinite(ref).all(dim=0) & torch.isfinite(cand).all(dim=0)
    ref, cand = ref[:, keep], cand[:, keep]
    err = cand - ref
    moved = ref - ref.mean(dim=0)
    drift = err - err.mean(dim=0)  # (a constant offset per place moves with nothing)
    norm_sq, moved_sq, err_sq = float((ref * ref).sum()), float((moved * moved).sum()), float((err * err).sum())
    if norm_sq == 0 or moved_sq == 0 or err_sq <= (TRACK_FLOOR ** 2) * norm_sq:
        return []
    slope = float((drift * moved).sum()) / moved_sq
    dof = max(1, moved.numel() - moved.shape[1] - 1)
    residual = float(((drift - slope * moved) ** 2).sum())
    t = slope / math.sqrt(max(residual, 1e-300) / (moved_sq * dof))
    if slope > -TRACK_SLOPE or t > -TRACK_T:
        return []
    data = {"error": math.sqrt(err_sq / norm_sq), "movement": math.sqrt(moved_sq / norm_sq), "slope": slope,
            "t": t, "draws": len(tracker.draws)}
    return [Finding(
        "draws-not-followed",
        f"over {len(tracker.draws)} random sets the outputs are off by {data['error']:.3g} of their norm, and the "
        f"error cancels {-slope:.2f} of how far the reference's outputs move between draws ({data['movement']:.3g}; "
        f"{-t:.1f} standard errors): they do not follow the inputs as the computation must (part of the work, or an "
        "estimate near what any draw gives)", data=data)]
