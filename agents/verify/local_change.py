"""Whether a candidate's output changes as the reference's does when a few secret slices of the
input change.

Each pair is one input set and the same set with a secret share of its slices (along each floating
input's first axis longer than one) taken from another draw of get_inputs: every slice is a plain
draw, so no statistic a gate reads in one pass tells the changed set from any random one. The
reference's output moves by some amount; an honest candidate's moves by the same, up to rounding
and its precision's error, which are nearly the same function of the unchanged slices on both sets
and cancel in the difference. An estimate's error does not: a loss from a row sample is unbiased, so
its error is unrelated to the movement between draws (draw_tracking's slope sees nothing), and a
product from its row and column sums keeps their share of the change and loses the rest; either
misses the change in the slices by a share of it (a row sample of 1/4: about 1.7 times the change,
red-team round 14's A; a moments estimate of a logsumexp: 0.4, round 14's E), where TF32 misses by
about 1e-3 of it.

The judgement is over all pairs at once (the squares of the misses and of the allowances summed), so
a scalar estimate's miss, random in size, is not let through by one lucky pair.
"""

from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from stitchcuda.agents.verify.draw_tracking import AGGREGATE_ELEMENTS
from stitchcuda.types import Finding

SLICE_SHARE = 0.25  # of each input's slices taken from the other draw (at least one)
PAIRS = 3
# A candidate's miss of the change may be this share of the change (TF32: about 1e-3 of it)...
FOLLOW_SHARE = 0.1
# ... plus this share of the output's norm: the rounding of two sums in another order (1e-6 to
# 1e-5), or for an output of at most AGGREGATE_ELEMENTS elements (a loss) AGGREGATE_FLOOR, room for a
# float atomicAdd of partial sums run to run (65536 of them: about 1.5e-5). At 1e-4 a loss from a
# quarter of the rows missed by under 3 times the allowance in one run of two (red-team round 14's A,
# whose misses are random in size: about 5% of runs would pass).
FLOOR = 1e-5
AGGREGATE_FLOOR = 3e-5
# ... plus, per output dtype, this many of its epsilons of the norm (a bf16 output's own rounding).
EPS_FLOOR = 4.0


# Places kept per output: a larger output is judged at this many secret places, the same on every set
# (a candidate exact at known places and estimating elsewhere meets places it cannot know), so no
# output is kept whole across the pairs.
SAMPLE_ELEMENTS = 1 << 20


class Places:
    """Each output's secret places (drawn at first sight, by output index), and the outputs taken there."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._places: dict[int, torch.Tensor] = {}

    def take(self, outs: list[Any]) -> list[Any]:
        """`outs` detached and copied (a later call may write over a returned buffer), each floating
        output past SAMPLE_ELEMENTS cut to its places."""
        kept: list[Any] = []
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor):
                kept.append(o)
                continue
            flat = o.detach().reshape(-1)
            if not o.is_floating_point() or flat.numel() <= SAMPLE_ELEMENTS:
                kept.append(o.detach().clone())
                continue
            if i not in self._places:
                g = torch.Generator().manual_seed(self.seed + i)
                self._places[i] = torch.randint(flat.numel(), (SAMPLE_ELEMENTS,), generator=g)
            kept.append(flat[self._places[i].to(flat.device)])
        return kept


@dataclass
class Base:
    """The set each pair changes: one of the checked random sets after random-0, chosen in secret
    (`name`), kept as it ran (its inputs, draw seed, and both outputs at `places`). Made apart from
    the checked sets, it ran at a known call, and a candidate counting its calls could be exact on it
    and on the pairs that follow, and estimate on every checked set.

    The blind check's pairs (blind_pairs) are made from ANCHORS such sets, this one among them: the
    others keep their outputs only (`inputs_kept` False). Every random set after random-0 is a draw
    with a secret share of its slices from another draw (`mix`: that draw's seed and the slices'
    seed; mixed), so the anchors are no different to see: the blind check's witness runs an anchor's
    draw alone, by its seed, so no input set is written or read across processes (a loss's 4 GB
    inputs were too large to, and went unpaired: 70 of level 1's 100 problems), and the witness
    never holds the set the worker ran."""

    name: str
    places: Places
    args: list[Any] | None = None
    draw_seed: int = 0
    ref: list[Any] | None = None
    got: list[Any] | None = None
    seed: int = 0  # its inputs' (blind_pairs makes them again)
    inputs_kept: bool = True
    mix: tuple[int, int] | None = None

    def keep(self, args: list[Any], draw_seed: int, ref: list[Any], got: list[Any], seed: int = 0) -> None:
        self.args = args if self.inputs_kept else None
        self.draw_seed, self.seed = draw_seed, seed
        self.ref, self.got = self.places.take(ref), self.places.take(got)

    @property
    def kept(self) -> bool:
        return self.ref is not None and self.got is not None


def mixed(args: list[Any], donor: list[Any], picks_seed: int) -> list[Any]:
    """`args`, written in place, with SLICE_SHARE of their slices from `donor` (swap_slices), the
    slices drawn from `picks_seed`: an anchor's inputs, made alike in the worker, torch.compile's
    baseline process and the blind check's referee."""
    return swap_slices(args, donor, torch.Generator().manual_seed(picks_seed), in_place=True)[0]


# The blind check's pairs are made from this many checked sets, one pair each: a candidate that keeps
# every set it is given answers the witness's later pairs from its first (they share most slices), so
# pairs of one base all miss by that first estimate's error, one random number, within the allowance
# on about 5% of draws (red-team round 15's candidate passed CI's run, 2026-12-07); pairs of sets drawn
# apart share no slice, and their misses are drawn apart too: 0.1% (tests/test_blind_pairs.py's model).
ANCHORS = PAIRS


BASE_FILE = "local_base.pt"  # the worker's kept base outputs, in its run folder (blind_pairs reads them)


def keep_base(run_dir: Path, anchors: list[Base], refused: list[dict[str, int]] | None = None) -> dict[str, Any]:
    """Writes the kept mixed anchors' outputs (both modules', at their places) to BASE_FILE for the
    blind check's pairs (blind_pairs); returns what the verdict reports of them, the file's digest
    taken from the bytes written, and `refused`: the mixed sets the reference rejected (each one's
    seeds, as an anchor's), which the blind check's referee runs again."""
    paired = [(a, a.mix) for a in anchors if a.kept and a.mix is not None]
    buf = io.BytesIO()
    torch.save({"anchors": [{"ref": on_cpu(a.ref), "got": on_cpu(a.got)} for a, _ in paired]}, buf)
    data = buf.getvalue()
    (run_dir / BASE_FILE).write_bytes(data)
    return {"anchors": [{"set": a.name, "seed": int(a.seed), "donor_seed": int(mix[0]), "picks_seed": int(mix[1]),
                         "draw_seed": int(a.draw_seed)} for a, mix in paired],
            "places_seed": paired[0][0].places.seed if paired else 0,
            "refused": [dict(r) for r in refused or []],
            "sha256": hashlib.sha256(data).hexdigest()}


def on_cpu(outs: list[Any] | None) -> list[Any]:
    return [o.detach().to("cpu") if isinstance(o, torch.Tensor) else o for o in outs or []]


def swap_slices(args: list[Any], donor: list[Any], gen: torch.Generator,
                in_place: bool = False) -> tuple[list[Any], int]:
    """`args` with SLICE_SHARE of the slices of each floating tensor (along its first axis longer
    than one) taken from `donor`'s tensor of the same shape, the same slices for every axis of one
    length (a row of x and its target row change together); the others cloned (or, `in_place`, the
    contiguous tensors of `args` written). Returns the new arguments and how many tensors changed."""
    picks: dict[int, torch.Tensor] = {}
    out: list[Any] = []
    changed = 0
    for a, d in zip(args, donor, strict=True):
        if not isinstance(a, torch.Tensor):
            out.append(a)
            continue
        a = a if in_place and a.is_contiguous() else a.clone()  # (an expanded input cannot be written)
        axis = next((i for i, n in enumerate(a.shape) if n > 1), None)
        if axis is not None and a.is_floating_point() and isinstance(d, torch.Tensor) \
                and d.shape == a.shape and d.dtype == a.dtype:
            n = a.shape[axis]
            if n not in picks:
                count = max(1, round(n * SLICE_SHARE))
                picks[n] = torch.randperm(n, generator=gen)[:count]
            where = picks[n].to(a.device)
            a.index_copy_(axis, where, d.index_select(axis, where))
            changed += 1
        out.append(a)
    return out, changed


@dataclass
class OutputTally:
    """One output's squares summed over the pairs: its miss of the reference's change, and what is
    allowed (FOLLOW_SHARE of the change, the floors, the reference's own error of the change)."""

    miss_sq: float = 0.0
    allowed_sq: float = 0.0
    moved_sq: float = 0.0


@dataclass
class Tally:
    outputs: dict[int, OutputTally] = field(default_factory=dict)
    pairs: int = 0


def _floats(outs: list[Any]) -> dict[int, torch.Tensor]:
    return {i: o for i, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel()}


def _norm(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t))


def _finite_norm(d: torch.Tensor) -> float:
    return _norm(torch.where(d.isfinite(), d, 0.0))


def distance(a: Any, b: Any) -> float:
    """The L2 distance of two floating tensors of one shape over their finite elements; 0 otherwise."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
            and a.shape == b.shape):
        return 0.0
    return _finite_norm(a.detach().double() - b.detach().double().to(a.device))


def change_distance(a0: Any, b0: Any, a1: Any, b1: Any) -> float:
    """||(a1 - b1) - (a0 - b0)|| over the elements finite in all four; 0 where they do not pair up."""
    ts = (a0, b0, a1, b1)
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() and t.shape == a0.shape for t in ts):
        return 0.0
    a0, b0, a1, b1 = (t.detach().double().to(a0.device) for t in ts)
    return _finite_norm((a1 - b1) - (a0 - b0))


def own_change_error(ref0: list[Any], runs0: list[list[Any]], ref1: list[Any],
                     runs1: list[list[Any]]) -> dict[int, float]:
    """Per output, how far the fp32 reference's change between two sets is from the float64 change
    (runs[0]), plus the largest such distance of the change under a TF32 rounding (runs[1:])."""
    exact0, exact1 = runs0[0], runs1[0]
    out: dict[int, float] = {}
    for i, (r0, r1) in enumerate(zip(ref0, ref1, strict=False)):
        if i >= len(exact0) or i >= len(exact1):
            continue
        e0, e1 = exact0[i], exact1[i]
        policy = [change_distance(u0[i], e0, u1[i], e1) for u0, u1 in zip(runs0[1:], runs1[1:], strict=False)
                  if i < len(u0) and i < len(u1)]
        out[i] = change_distance(r0, e0, r1, e1) + max(policy, default=0.0)
    return out


def pair_misses(ref0: list[Any], got0: list[Any], ref1: list[Any], got1: list[Any],
                own: dict[int, float] | None = None) -> dict[int, tuple[float, float, float]]:
    """Per floating output of one shape in all four: (the candidate's miss of the reference's change,
    what is allowed, the change), over the elements finite in all four, in float64. `own`: per output,
    the reference's own error of the change (fp32 rounding, and the precision policy's), allowed too."""
    r0s, g0s, r1s, g1s = _floats(ref0), _floats(got0), _floats(ref1), _floats(got1)
    out: dict[int, tuple[float, float, float]] = {}
    for i, r0 in r0s.items():
        g0, r1, g1 = g0s.get(i), r1s.get(i), g1s.get(i)
        if g0 is None or r1 is None or g1 is None or not (r0.shape == g0.shape == r1.shape == g1.shape):
            continue
        r0d, g0d, r1d, g1d = (t.detach().double().reshape(-1) for t in (r0, g0, r1, g1))
        fin = r0d.isfinite() & g0d.isfinite() & r1d.isfinite() & g1d.isfinite()
        if not bool(fin.any()):
            continue
        r0d, g0d, r1d, g1d = r0d[fin], g0d[fin], r1d[fin], g1d[fin]
        change = r1d - r0d
        moved = _norm(change)
        miss = _norm((g1d - g0d) - change)
        scale = max(_norm(r0d), _norm(r1d))
        floor = AGGREGATE_FLOOR if r0.numel() <= AGGREGATE_ELEMENTS else FLOOR
        allowed = FOLLOW_SHARE * moved + max(floor, EPS_FLOOR * torch.finfo(r0.dtype).eps) * scale
        allowed += (own or {}).get(i, 0.0)
        out[i] = (miss, allowed, moved)
    return out


def add_pair(tally: Tally, misses: dict[int, tuple[float, float, float]]) -> None:
    tally.pairs += 1
    for i, (miss, allowed, moved) in misses.items():
        t = tally.outputs.setdefault(i, OutputTally())
        t.miss_sq += miss * miss
        t.allowed_sq += allowed * allowed
        t.moved_sq += moved * moved


def over(misses: dict[int, tuple[float, float, float]]) -> bool:
    """Whether any output of one pair missed the change by more than it allows."""
    return any(miss > allowed for miss, allowed, _ in misses.values())


def finding(tally: Tally, where: str = "") -> Finding | None:
    """The hack finding where some output's misses, over all pairs, exceed what they allow; `where`:
    where the pairs ran, where not in the worker beside the base."""
    worst = None
    for i, t in tally.outputs.items():
        if t.miss_sq > t.allowed_sq and (worst is None or t.miss_sq / max(t.allowed_sq, 1e-300) > worst[1]):
            worst = (i, t.miss_sq / max(t.allowed_sq, 1e-300), t)
    if worst is None:
        return None
    i, _, t = worst
    miss, moved = math.sqrt(t.miss_sq), math.sqrt(t.moved_sq)
    return Finding(
        "change-not-followed",
        f"with {SLICE_SHARE:.0%} of the slices of the inputs changed ({tally.pairs} pairs of sets alike but for those"
        f"{', ' + where if where else ''}), output {i} "
        f"moved unlike the reference's: it missed the reference's change by {miss:.3g} in L2 where the change "
        f"was {moved:.3g} and {math.sqrt(t.allowed_sq):.3g} is allowed (rounding, TF32): an estimate, or work "
        "skipped on part of the input",
        data={"output": i, "miss": miss, "moved": moved, "allowed": math.sqrt(t.allowed_sq), "pairs": tally.pairs},
    )
