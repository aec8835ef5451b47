"""A few timed outputs, picked in secret, compared element by element with what their set must give.

Every timed output is held to its set's sum and L1 norm (dynamic_check.stats_match): cheap, and
enough for stale, garbage or skipped work. It is not enough for an output with the right values in
the wrong places (rows rolled by one keep both sums) or an estimate built to keep them, on calls a
candidate can tell are timed: the checked calls run under call_watch's profile function and the
timed ones do not (a red-team review, 2026-12-04). So a few trials, drawn from the OS before timing
starts and never told to the candidate, are compared in full (or, for outputs past SAMPLE_ELEMENTS,
on that many elements at places drawn the same way), outside the timed window: with what the set
must give, within tolerance, and with the candidate's own untimed output on the same inputs, which
the same kernels reproduce to the order of their additions (drift). An estimate within tolerance on
the timed calls alone passes the first and not the second (a red-team note, 2026-12-04)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import torch

from stitchcuda.agents.verify.compare import Mismatch, Tolerance, compare_outputs

# Timed trials compared in full, of the usual 50: a candidate wrong on a share f of its timed calls
# escapes all of them with probability (1 - f)^PICKS.
PICKS = 4
# Elements kept per output to compare; larger outputs are compared at this many places, drawn in
# secret (a miss on a share f of the elements escapes with probability (1 - f)^SAMPLE_ELEMENTS).
SAMPLE_ELEMENTS = 1 << 22


@dataclass
class Kept:
    """One output of one timed set: its expected values at `places` (flat indices), or in full
    (`places` None; `expected` is the value itself for an output that is not a tensor)."""

    places: torch.Tensor | None
    expected: Any
    shape: tuple[int, ...] = ()
    own: Any = None  # the candidate's own untimed output on the set, at the same places (keep_own)
    rerun: Any = None  # ... from a second untimed call: how far the candidate's reruns differ honestly


@dataclass
class TimedSample:
    """Per timed set, its outputs as kept; `trials`: the trial numbers compared."""

    sets: list[list[Kept]]
    trials: frozenset[int]


def pick_trials(trials: int, picks: int = PICKS) -> frozenset[int]:
    """`picks` trial numbers of range(trials), from the OS: no seed the candidate can read decides them."""
    pool = list(range(trials))
    chosen = set()
    while pool and len(chosen) < picks:
        chosen.add(pool.pop(secrets.randbelow(len(pool))))
    return frozenset(chosen)


def keep_set(outs: list[Any], *, elements: int = SAMPLE_ELEMENTS) -> list[Kept]:
    """What one timed set's outputs must be, kept whole up to `elements` per output and at that many
    secret places beyond: called as each set's outputs are made, so no set's outputs are held in
    full through the rest (two sets of a large output, beside eight workers on one GPU, would not fit)."""
    kept = []
    for o in outs:
        if isinstance(o, torch.Tensor) and o.numel() > elements:
            flat = o.detach().reshape(-1)
            places = torch.randint(0, flat.numel(), (elements,), device=flat.device,
                                   generator=_os_generator(flat.device)).sort().values
            kept.append(Kept(places, flat[places].clone(), tuple(o.shape)))
        elif isinstance(o, torch.Tensor):
            kept.append(Kept(None, o.detach().clone()))
        else:
            kept.append(Kept(None, o))
    return kept


def keep(expected_sets: list[list[Any]], trials: int, *, picks: int = PICKS,
         elements: int = SAMPLE_ELEMENTS) -> TimedSample:
    """keep_set for each timed set, and the trials to compare."""
    return TimedSample([keep_set(outs, elements=elements) for outs in expected_sets], pick_trials(trials, picks))


def _os_generator(device: torch.device) -> torch.Generator:
    """A generator seeded from the OS: the places are not the global generator's next draws, which a
    candidate seeding it could predict."""
    g = torch.Generator(device=device)
    g.manual_seed(secrets.randbits(63))
    return g


def _picked(k: Kept, o: torch.Tensor) -> torch.Tensor:
    """Output `o` where `k` keeps its set's: whole, or at k.places (o of k.shape)."""
    return o.detach() if k.places is None else o.detach().reshape(-1)[k.places.to(o.device)]


def _at_places(k: Kept, o: Any) -> torch.Tensor | None:
    if not isinstance(o, torch.Tensor) or (k.places is not None and tuple(o.shape) != k.shape):
        return None
    return _picked(k, o).clone()


def keep_own(kept: list[Kept], outs: list[Any], rerun: list[Any]) -> None:
    """The candidate's untimed outputs `outs` on the set `kept` was kept for, and those of a second
    untimed call on the same inputs (`rerun`), at the same places."""
    if len(outs) != len(kept) or len(rerun) != len(kept):
        return
    for k, o, r in zip(kept, outs, rerun, strict=True):
        k.own, k.rerun = _at_places(k, o), _at_places(k, r)


# A timed output was computed another way while timed where it is further from the candidate's own
# untimed output on the same inputs (relative L2) than DRIFT_FLOOR, than DRIFT_RATIO times that output's
# error against the reference (or the checked sets' error, if smaller: an untimed call made noisy on
# purpose moves no bar), and than RERUN_RATIO times how far a second untimed call is from the first
# (that distance counted up to the error: a rerun made noisy on purpose lifts the bar at most 2x).
# The same kernels on the same inputs differ by the order of their additions (atomics, split-K): ~1e-6
# in fp32, and in a bf16 result added atomically up to its own rounding; the rerun measures that for
# this candidate, where a ratio of two single draws (a scalar loss) would not (a review, 2026-12-04).
DRIFT_FLOOR = 1e-4
DRIFT_RATIO = 2.0
RERUN_RATIO = 4.0
# Fewer finite floating elements than this (a scalar loss, a few logits) and each figure is one or a few
# draws of the noise, their ratios anything: such outputs are left to the comparison within tolerance
# (a review, 2026-12-04: a bf16 scalar summed atomically crossed a two-draw ratio on 10 of 40 runs).
DRIFT_MIN_ELEMENTS = 1024


@dataclass(frozen=True)
class Drift:
    """drift's figures, each a relative L2 over the floating outputs' finite elements."""

    moved: float  # the timed outputs from the candidate's own untimed ones
    own_error: float  # those untimed ones from what the set must give
    rerun: float  # a second untimed call's from the first


def drift(sample: TimedSample, set_index: int, outs: list[Any]) -> Drift | None:
    """How far the timed outputs `outs` of set `set_index` are from the candidate's own untimed ones
    on the same inputs, with the bars drifted() holds that to; None where there is nothing to compare
    (no untimed output kept: a set the fp64 referee settled, whose expectation is that output itself)
    or too little of it (DRIFT_MIN_ELEMENTS)."""
    kept = sample.sets[set_index]
    if len(outs) != len(kept):
        return None
    moved = own_sq = err = want_sq = rerun = 0.0
    elements = 0
    for k, o in zip(kept, outs, strict=True):
        if k.own is None or k.rerun is None or not isinstance(o, torch.Tensor) \
                or not (o.is_floating_point() or o.is_complex()) or (k.places is not None and tuple(o.shape) != k.shape):
            continue
        got = _picked(k, o)
        if got.shape != k.own.shape or k.rerun.shape != got.shape or not isinstance(k.expected, torch.Tensor) \
                or k.expected.shape != got.shape:
            continue
        got, own, again, want = (torch.view_as_real(t) if t.is_complex() else t
                                 for t in (got, k.own, k.rerun, k.expected))
        got, own, again, want = got.double(), own.double(), again.double(), want.double().to(got.device)
        finite = torch.isfinite(got) & torch.isfinite(own) & torch.isfinite(again) & torch.isfinite(want)
        got, own, again, want = got[finite], own[finite], again[finite], want[finite]
        elements += got.numel()
        moved += float(((got - own) ** 2).sum())
        rerun += float(((again - own) ** 2).sum())
        own_sq += float((own ** 2).sum())
        err += float(((own - want) ** 2).sum())
        want_sq += float((want ** 2).sum())
    if own_sq == 0.0 or want_sq == 0.0 or elements < DRIFT_MIN_ELEMENTS:
        return None
    return Drift((moved / own_sq) ** 0.5, (err / want_sq) ** 0.5, (rerun / own_sq) ** 0.5)


def bar(d: Drift, checked_error: float | None = None) -> float:
    """The distance past which drifted() calls a timed output computed another way."""
    error = d.own_error if checked_error is None else min(d.own_error, checked_error)
    # The rerun's term at most RERUN_RATIO x that error: a rerun perturbed on purpose (within the
    # tolerance) must not lift the bar past what the candidate's own precision explains.
    return max(DRIFT_FLOOR, DRIFT_RATIO * error, RERUN_RATIO * min(d.rerun, error))


def drifted(d: Drift | None, checked_error: float | None = None) -> bool:
    """Whether drift's figures say the timed output was computed another way (bar)."""
    return d is not None and d.moved > bar(d, checked_error)


def compare(sample: TimedSample, set_index: int, outs: list[Any], tol: Tolerance) -> Mismatch:
    """The timed outputs `outs` (flattened) of set `set_index` against what was kept for it."""
    kept = sample.sets[set_index]
    if len(outs) != len(kept):
        return Mismatch(False, f"{len(outs)} outputs where {len(kept)} were expected")
    want, got = [], []
    for k, o in zip(kept, outs, strict=True):
        if k.places is None:
            want.append(k.expected)
            got.append(o)
        elif not isinstance(o, torch.Tensor) or tuple(o.shape) != k.shape:
            return Mismatch(False, f"an output of shape {tuple(getattr(o, 'shape', ()))} where {k.shape} was expected")
        else:
            want.append(k.expected)
            got.append(_picked(k, o))
    return compare_outputs(want, got, tol)
