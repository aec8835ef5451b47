"""Comparing a candidate's outputs with the reference's, with tolerances that say why."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from stitchcuda.agents.verify.torch_ops import MATMUL_LIKE, REDUCTION_LIKE


@dataclass
class Tolerance:
    rtol: float
    why: str
    l2: float | None = None  # the relative L2 error allowed where tighter than rtol (REDUCTION_L2)

    @property
    def l2_limit(self) -> float:
        return self.rtol if self.l2 is None else self.l2

    def to_dict(self) -> dict[str, Any]:
        out = {"rtol": self.rtol, "atol": f"{self.rtol:g} x mean|ref| per output", "why": self.why}
        return out if self.l2 is None else {**out, "l2": self.l2}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tolerance:
        """to_dict's value back (the compile baseline's request carries the candidate's class)."""
        return cls(float(d["rtol"]), d["why"], None if d.get("l2") is None else float(d["l2"]))


# fp32 products under the strict policy: KernelBench's current evaluator's figure. fp32 accumulation
# in another order stays well inside it; TF32 operands (2^-11) or bf16 ones do not, where a sum
# cancels. A miss still goes to the fp64 referee, which allows the reference's own rounding.
STRICT_PRODUCT_RTOL = 1e-4


# The relative L2 error allowed where the reference's work is reductions and pointwise fp32 (no
# products): another order of the same fp32 sums stays near 1e-6 (1e-5 over tens of millions of
# terms), and the fp64 referee allows the reference's own error beside it. At rtol's 1e-3, a norm,
# a logsumexp or a cumsum estimated from a sample of its input (1/61 of it, half of each row, the
# even elements) passed every iid set at 2e-4-2.6e-3, behind a gate that sent every structured set
# to an exact path (a red-team round, 2026-12-06). Elements keep rtol's own allowance.
REDUCTION_L2 = 1e-4


def tolerance_for(reference_ops: Iterable[str], dtypes: Iterable[torch.dtype], policy: str = "tf32",
                  reference_tf32: Iterable[str] = ()) -> Tolerance:
    """fp32 pointwise work is held to 1e-4; looser only where the reference's own ops justify it.
    `policy` (types.judging_policy): under `strict` an fp32 product gets no TF32 room (1e-2 let a
    candidate that rounded its operands to TF32, or to bf16, pass a strict run: a red-team review,
    2026-12-04), unless the reference itself runs one of its ops on TF32: `reference_tf32`, the ops
    PyTorch's switches put on TF32 as the reference runs (cuDNN's convolutions by default), where an
    exact candidate differs from it by TF32's error."""
    ops = set(reference_ops)
    dts = set(dtypes)
    if torch.bfloat16 in dts:
        return Tolerance(2e-2, "bf16 outputs (8-bit mantissa)")
    if torch.float16 in dts:
        return Tolerance(1e-2, "fp16 outputs (11-bit mantissa)")
    if ops & MATMUL_LIKE and policy == "strict" and not ops & set(reference_tf32):
        hit = sorted(ops & MATMUL_LIKE)[:4]
        return Tolerance(
            STRICT_PRODUCT_RTOL,
            f"matmul/conv in reference ({', '.join(hit)}) under the strict policy: fp32 throughout, accumulation order",
        )
    if ops & MATMUL_LIKE:
        hit = sorted(ops & MATMUL_LIKE)[:4]
        return Tolerance(
            1e-2,
            f"matmul/conv in reference ({', '.join(hit)}): TF32 tensor cores (cuDNN's default) and accumulation order",
        )
    if ops & REDUCTION_LIKE:
        hit = sorted(ops & REDUCTION_LIKE)[:4]
        return Tolerance(1e-3, f"reductions in reference ({', '.join(hit)}): accumulation order; relative L2 error "
                         f"{REDUCTION_L2:g}", l2=REDUCTION_L2)
    return Tolerance(1e-4, "pointwise fp32 work")


@dataclass
class Mismatch:
    ok: bool
    message: str
    max_abs: float = 0.0
    rel_norm: float = 0.0
    bad_fraction: float = 0.0
    integers: bool = False  # a miss on integer elements (which differ, or not): no error figure


NEAR_INT_FRACTION = 0.01  # integer elements that may differ on a miss that is still a near one (argmax ties)


def finite_miss(m: Mismatch) -> bool:
    """Whether a failed comparison missed on finite values (elements beyond tolerance, or the L2
    error): compare.py gives those misses their error figures, while NaN/inf placement, shapes,
    dtypes and integer outputs leave them at zero (mendable_miss: what the Coder's ladder climbs on)."""
    return not m.ok and (m.rel_norm > 0 or m.max_abs > 0)


def mendable_miss(m: Mismatch) -> bool:
    """Whether more precision may mend a failed comparison (the Finding's FINITE_MISS, which the
    built-in Coder's ladder climbs on): a miss on finite values (finite_miss), or a few integer
    elements off, at most NEAR_INT_FRACTION of them: argmax's near-ties after TF32 work.
    bench/coverage's flip_tta_segmentation (argmax over TF32 convolutions' softmax) missed 1-93 of
    65,536 elements at TF32 on every H100 and H200 run and its ladder never climbed (2026-12-06)."""
    return finite_miss(m) or integer_near_ties(m)


def integer_near_ties(m: Mismatch) -> bool:
    """Whether a failed comparison is an integer output with a few elements off (at most
    NEAR_INT_FRACTION): argmax's near-ties, which rounding can flip in an honest candidate."""
    return not m.ok and m.integers and 0 < m.bad_fraction <= NEAR_INT_FRACTION


def compare_outputs(ref: list[Any], got: list[Any], tol: Tolerance) -> Mismatch:
    if len(ref) != len(got):
        return Mismatch(False, f"returned {len(got)} outputs, reference returns {len(ref)}")
    worst = Mismatch(True, "match")
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        if not isinstance(r, torch.Tensor):
            if isinstance(g, torch.Tensor) or r != g:
                return Mismatch(False, f"output {i}: {g!r} != reference {r!r}"[:500])
            continue
        if not isinstance(g, torch.Tensor):
            return Mismatch(False, f"output {i} is {type(g).__name__}, reference gives a tensor")
        if g.shape != r.shape:
            return Mismatch(False, f"output {i} has shape {tuple(g.shape)}, reference {tuple(r.shape)}")
        if g.dtype != r.dtype:
            return Mismatch(False, f"output {i} has dtype {g.dtype}, reference {r.dtype}")
        if g.device != r.device:
            return Mismatch(False, f"output {i} is on {g.device}, reference on {r.device}")
        m = _compare_tensor(r, g, tol, i)
        if not m.ok:
            return m
        if m.rel_norm >= worst.rel_norm:
            worst = m
    return worst


KERNELBENCH_TOL = 1e-4  # KernelBench's current evaluator: torch.allclose at atol = rtol = 1e-4 (v0/v0.1: 1e-2)


def kernelbench_close(ref: list[Any], got: list[Any], tol: float = KERNELBENCH_TOL) -> bool:
    """KernelBench's own criterion, beside ours: every tensor output allclose at atol = rtol = tol
    (NaN only where the reference has NaN), other outputs equal. Reported, not judged by: our
    tolerance is the verdict's, this lets our figures be set beside today's KernelBench results."""
    if len(ref) != len(got):
        return False
    for r, g in zip(ref, got, strict=True):
        if not isinstance(r, torch.Tensor) or not isinstance(g, torch.Tensor):
            if isinstance(r, torch.Tensor) or isinstance(g, torch.Tensor) or r != g:
                return False
            continue
        if r.shape != g.shape or r.dtype != g.dtype or r.device != g.device:
            return False
        for start in range(0, r.numel(), _CHUNK):
            rc, gc = r.reshape(-1)[start:start + _CHUNK], g.reshape(-1)[start:start + _CHUNK]
            if not torch.allclose(gc, rc, atol=tol, rtol=tol, equal_nan=True):
                return False
    return True


_CHUNK = 1 << 25  # elements per pass: comparing in float64 must not double a 6 GB output at once


def _compare_tensor(r: torch.Tensor, g: torch.Tensor, tol: Tolerance, i: int) -> Mismatch:
    if not r.is_floating_point() and not r.is_complex():
        bad = (r != g).sum().item()
        return Mismatch(
            bad == 0, f"output {i}: {bad} of {r.numel()} integer elements differ" if bad else "match",
            bad_fraction=bad / max(1, r.numel()), integers=True,
        )
    if r.is_complex():  # real and imaginary parts alike (a cast to float64 would drop the latter)
        r, g = torch.view_as_real(r), torch.view_as_real(g)
    rflat, gflat = r.reshape(-1), g.reshape(-1)
    n = rflat.numel()
    # Pass 1: NaN/inf placement and the reference's mean magnitude (the atol scale).
    abs_sum, finite_n = 0.0, 0
    for a in range(0, n, _CHUNK):
        rc, gc = rflat[a : a + _CHUNK].double(), gflat[a : a + _CHUNK].double()
        rnan, gnan = rc.isnan(), gc.isnan()
        if not torch.equal(rnan, gnan):
            k = int((rnan != gnan).sum().item())
            where = (
                "NaN where the reference is finite"
                if bool((gnan & ~rnan).any())
                else "finite where the reference is NaN"
            )
            return Mismatch(
                False, f"output {i}: {k} elements {where} (unwritten or wrong)", bad_fraction=k / n
            )
        rinf, ginf = rc.isinf(), gc.isinf()
        if not torch.equal(rinf, ginf) or not torch.equal(rc[rinf], gc[ginf]):
            return Mismatch(False, f"output {i}: infinities differ from the reference")
        fin = ~(rnan | rinf)
        abs_sum += float(rc[fin].abs().sum().item())
        finite_n += int(fin.sum().item())
    if finite_n == 0:
        return Mismatch(True, "match")
    atol = tol.rtol * max(abs_sum / finite_n, 1e-30)
    # Pass 2: elementwise and L2 error on the finite elements.
    n_bad, max_abs, diff_sq, ref_sq, worst = 0, 0.0, 0.0, 0.0, (0.0, 0.0)
    for a in range(0, n, _CHUNK):
        rc, gc = rflat[a : a + _CHUNK].double(), gflat[a : a + _CHUNK].double()
        fin = rc.isfinite()
        rc, gc = rc[fin], gc[fin]
        if rc.numel() == 0:
            continue
        diff = (gc - rc).abs()
        n_bad += int((diff > atol + tol.rtol * rc.abs()).sum().item())
        j = int(torch.argmax(diff).item())
        if diff[j].item() >= max_abs:
            max_abs = float(diff[j].item())
            worst = (float(gc[j].item()), float(rc[j].item()))
        diff_sq += float((diff * diff).sum().item())
        ref_sq += float((rc * rc).sum().item())
    rel_norm = math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else (0.0 if max_abs == 0 else math.inf)
    if n_bad or rel_norm > tol.l2_limit:
        return Mismatch(
            False,
            f"output {i}: {n_bad} of {finite_n} elements beyond tolerance (rtol {tol.rtol:g}"
            + (f", relative L2 {tol.l2:g}" if tol.l2 is not None else "") + "); "
            f"max |diff| {max_abs:.3g} (got {worst[0]:.6g}, expected {worst[1]:.6g}); "
            f"relative L2 error {rel_norm:.3g}",
            max_abs,
            rel_norm,
            n_bad / finite_n,
        )
    return Mismatch(True, f"max |diff| {max_abs:.3g}, relative L2 error {rel_norm:.3g}", max_abs, rel_norm)


# The fp64 referee. Where the plain check fails, the inputs may be ill-conditioned for fp32 (x - mean
# of values near 1 after a LayerNorm, a mean that cancels to ~0): the fp32 reference is then itself
# far from the exact result, and being close to it is the wrong test. The candidate passes if it is
# about as close to the float64 result as the fp32 reference is: in L2, within twice the
# reference's own error plus the usual rtol; per element, within the usual tolerance plus a few times
# the reference's own error at that element plus a multiple of its median error (a robust scale: a
# few badly conditioned elements must not loosen the check everywhere). Non-finite values must be
# where the fp32 reference has them. A candidate that skips or garbles work is far from both.
# Where the fp32 reference itself misses float64 beyond that tolerance on some elements (a near-tie
# in a softmax of large logits flips a row: level1/97 on inputs scaled by 1e3), so may the
# candidate, on other elements, up to twice as many (the L2 factor); where the reference misses on
# none, neither may the candidate.
# "The reference's own error" is its larger rounding error of two kinds: on these inputs, and on a
# few inputs one ulp away (`spread`: each moved input's fp32 result against float64 on the same moved
# input, so a step in the function is not mistaken for rounding). A candidate under the tf32 policy
# may also be off, per element, by REFEREE_POLICY_ERRORS times the reference's own error with its
# matmuls' and convolutions' operands rounded to TF32 (policy_error); that error widens neither the
# median's atol nor the L2 budget, which fp32 rounding sets. One draw of rounding noise can be
# lucky (level2/23's output, a mean that is zero but for rounding, had the reference 0.9-1.3e-7 from
# float64 across sets while another order of the same sums landed at 2.1-2.4e-7).
REFEREE_L2_FACTOR = 2.0
REFEREE_OWN_ERRORS = 4.0
# A library's TF32 rounds its operands as one of the two emulations does (to nearest, toward zero),
# so twice their larger error covers it; four times let a red-team candidate with 9-bit operands
# (4x TF32's error, no faster) pass, and the median's atol widened by TF32 error doubled the atol
# of every element of a tanh(Linear) output (2026-12-01).
REFEREE_POLICY_ERRORS = 2.0
REFEREE_MEDIAN_ERRORS = 12.0
# Elements past their per-element allowance the referee lets pass beyond twice the fp32
# reference's own count, per this many elements, where the L2 error is within budget: level3/1_MLP
# at TF32 missed one set by one element of 1,048,576 (its L2 error 4.62 against a budget of 90.2)
# and ran at 3xTF32, 4.7x slower (H200, 2026-12-04). Outputs under a million elements get none;
# work skipped on one element in a million buys no time.
REFEREE_STRAY_PER = 1_000_000
# ...each within this many times its own allowance: an element off by anything (a race, a tail
# left unwritten on an unpoisoned set) is no stray.
REFEREE_STRAY_CAP = 4.0
_MEDIAN_SAMPLE = 1 << 20


@dataclass
class RoundingSpread:
    """The fp32 reference's rounding error on inputs moved one ulp, per output: the largest
    |fp32 - float64| per element (fp32, or None where not measured)."""

    own: list[torch.Tensor | None]
    samples: int = 0
    # The precision policy the reference also ran under, on the inputs themselves (policy_error),
    # and its largest |result - float64| per element there.
    policy: str = ""
    policy_own: list[torch.Tensor | None] = field(default_factory=list)


def rounding_spread(pairs: Iterable[tuple[list[Any], list[Any]]], ref: list[Any]) -> RoundingSpread:
    """Fold (fp32 outputs, float64 outputs) pairs, one per moved input, into a RoundingSpread for
    `ref`'s outputs; a pair whose outputs do not match `ref`'s shapes is left out. Only running
    maxima are kept, so one pair at a time needs to exist."""
    spread = RoundingSpread([None] * len(ref))
    for r32, r64 in pairs:
        if _fold(spread.own, ref, r32, r64):
            spread.samples += 1
        del r32, r64  # before the next pair is made: one pair alive at a time
    return spread


def policy_error(spread: RoundingSpread, ref: list[Any], under_policy: list[Any], exact: list[Any], policy: str) -> None:
    """Widen `spread` by the reference's own error under the candidate's precision policy on the same
    inputs (`under_policy`: its matmuls' and convolutions' operands rounded to TF32, the rest exact;
    precision.tf32_emulated): what that policy allows is, per element, what the reference itself
    computes under it. Strict fp32 rounding says nothing of an output that a few large inputs
    dominate (the sparse-spikes set: a spike 1e3 times the rest, rounded to TF32's 10 bits, moves
    its neighbourhood by 5e-4 of the spike, past an atol set by the mean output), so TF32 candidates
    and torch.compile under TF32 alike missed there (level 3's SqueezeNet and ShuffleNet on the
    H200, 2026-12-01)."""
    if not spread.policy_own:
        spread.policy_own = [None] * len(ref)
    if _fold(spread.policy_own, ref, under_policy, exact):
        spread.policy = policy


def _fold(maxima: list[torch.Tensor | None], ref: list[Any], r32: list[Any], r64: list[Any]) -> bool:
    """Each output's running maximum of |r32 - r64| into `maxima` (one per output of `ref`, None
    until first measured); False where the pair does not match `ref`'s outputs."""
    if len(r32) != len(ref) or len(r64) != len(ref):
        return False
    for i, (base, a, b) in enumerate(zip(ref, r32, r64, strict=True)):
        if not (isinstance(base, torch.Tensor) and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.shape == base.shape == b.shape and base.is_floating_point()):
            continue
        own = maxima[i] if maxima[i] is not None else torch.zeros(base.shape, dtype=torch.float32, device=base.device)
        af, bf, of = a.reshape(-1), b.reshape(-1), own.view(-1)
        for c in range(0, af.numel(), _CHUNK):
            d = (af[c : c + _CHUNK].double() - bf[c : c + _CHUNK].to(af.device).double()).abs()
            d = torch.where(d.isfinite(), d, torch.zeros_like(d))
            of[c : c + _CHUNK] = torch.maximum(of[c : c + _CHUNK], d.float())
        maxima[i] = own
    return True


def judge_against_exact(
    ref: list[Any], got: list[Any], exact: list[Any], tol: Tolerance, spread: RoundingSpread | None = None
) -> Mismatch:
    """`exact`: the reference's outputs computed in float64 on the same inputs; `spread`: its
    rounding on inputs one ulp away (rounding_spread), where measured."""
    if not (len(ref) == len(got) == len(exact)):
        return Mismatch(False, "fp64 referee: output counts differ")
    worst = Mismatch(True, "match")
    for i, (r, g, e) in enumerate(zip(ref, got, exact, strict=True)):
        if isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor) and isinstance(e, torch.Tensor) \
                and not r.is_floating_point() and not r.is_complex():
            m = _judge_integers(r, g, e, tol, i)
        elif not isinstance(r, torch.Tensor) or not r.is_floating_point():
            m = compare_outputs([r], [g], tol)  # not a rounding question
        elif not isinstance(g, torch.Tensor) or not isinstance(e, torch.Tensor) or g.shape != r.shape \
                or e.shape != r.shape or g.dtype != r.dtype or g.device != r.device:
            m = Mismatch(False, f"output {i}: not comparable with the fp64 referee")
        else:
            own = spread.own[i] if spread is not None and i < len(spread.own) else None
            near = (own, spread.samples) if own is not None and spread is not None else None
            under = spread.policy_own[i] if spread is not None and i < len(spread.policy_own) else None
            m = _judge_tensor(r, g, e.to(r.device), tol, i, near, (under, spread.policy) if under is not None else None)
        if not m.ok:
            return m
        if m.rel_norm >= worst.rel_norm:
            worst = m
    return worst


def _judge_integers(r: torch.Tensor, g: torch.Tensor, e: torch.Tensor, tol: Tolerance, i: int) -> Mismatch:
    """An integer output made from rounded values (an argmax, a top-k's indices, a bucket): where the
    reference's own differs from the float64 run's in places (near-ties its rounding flipped: an
    argmax over TF32 convolutions' logits, bench/coverage's flip_tta_segmentation on the H200), the
    candidate may differ from the float64 run in at most REFEREE_L2_FACTOR times as many. Where the
    reference agrees with float64 everywhere, nothing may differ, as the plain check demands."""
    plain = compare_outputs([r], [g], tol)
    if plain.ok:
        return plain
    if e.shape != r.shape or g.shape != r.shape or e.dtype != r.dtype or g.dtype != r.dtype or g.device != r.device:
        return Mismatch(False, f"output {i}: not comparable with the fp64 referee")
    e = e.to(r.device)
    ref_bad, n_bad = int((r != e).sum().item()), int((g != e).sum().item())
    ok = n_bad <= REFEREE_L2_FACTOR * ref_bad
    return Mismatch(ok, f"output {i} against the fp64 result: {n_bad} of {r.numel()} integer elements differ "
                        f"(the reference: {ref_bad})", 0.0, 0.0, n_bad / max(1, r.numel()))


def _own_error(r: torch.Tensor, e: torch.Tensor, near: torch.Tensor | None) -> torch.Tensor:
    """Per element, the reference's error |r - e|, or its error nearby where that is larger."""
    d = (r.double() - e).abs()
    return d if near is None else torch.maximum(d, near.double())


def _median_error(rflat: torch.Tensor, eflat: torch.Tensor, near: torch.Tensor | None) -> float:
    """Median own error over finite elements, from an evenly spaced sample (outputs run to billions)."""
    step = max(1, rflat.numel() // _MEDIAN_SAMPLE) | 1  # odd: no lock-step with power-of-two rows
    d = _own_error(rflat[::step], eflat[::step].double(), near[::step] if near is not None else None)
    d = d[d.isfinite()]
    return float(d.median().item()) if d.numel() else 0.0


def _judge_tensor(
    r: torch.Tensor, g: torch.Tensor, e: torch.Tensor, tol: Tolerance, i: int,
    near: tuple[torch.Tensor, int] | None = None, under: tuple[torch.Tensor, str] | None = None,
) -> Mismatch:
    rflat, gflat, eflat = r.reshape(-1), g.reshape(-1), e.reshape(-1)
    nflat = near[0].reshape(-1) if near is not None else None
    uflat = under[0].reshape(-1) if under is not None else None
    n = rflat.numel()
    noise_sq = err_sq = exact_sq = abs_sum = 0.0
    finite_n = 0
    for a in range(0, n, _CHUNK):
        rc, gc, ec = (t[a : a + _CHUNK].double() for t in (rflat, gflat, eflat))
        # NaN and inf exactly where the fp32 reference has them (as the plain check demands).
        rnan, rinf = rc.isnan(), rc.isinf()
        if not torch.equal(rnan, gc.isnan()) or not torch.equal(rinf, gc.isinf()) or not torch.equal(rc[rinf], gc[rinf]):
            return Mismatch(False, f"output {i}: NaN or infinities differ from the reference")
        fin = rc.isfinite() & ec.isfinite()
        rc, gc, ec = rc[fin], gc[fin], ec[fin]
        noise_sq += float(((rc - ec) ** 2).sum().item())
        err_sq += float(((gc - ec) ** 2).sum().item())
        exact_sq += float((ec * ec).sum().item())
        abs_sum += float(ec.abs().sum().item())
        finite_n += int(fin.sum().item())
    if finite_n == 0:
        return compare_outputs([r], [g], tol)
    median = _median_error(rflat, eflat, nflat)
    atol = tol.rtol * abs_sum / finite_n + REFEREE_MEDIAN_ERRORS * median
    n_bad, n_far, ref_bad, max_abs, near_sq = 0, 0, 0, 0.0, 0.0
    for a in range(0, n, _CHUNK):
        rc, gc, ec = (t[a : a + _CHUNK].double() for t in (rflat, gflat, eflat))
        both = rc.isfinite() & ec.isfinite()
        diff = (gc[both] - ec[both]).abs()
        ref_bad += int(((rc[both] - ec[both]).abs() > atol + tol.rtol * ec[both].abs()).sum().item())
        own = _own_error(rc[both], ec[both], nflat[a : a + _CHUNK][both] if nflat is not None else None)
        allowed = atol + tol.rtol * ec[both].abs() + REFEREE_OWN_ERRORS * own
        if uflat is not None:
            allowed = allowed + REFEREE_POLICY_ERRORS * uflat[a : a + _CHUNK][both].double()
        if nflat is not None:
            # The nearby runs' share of the L2 allowance, each element capped at a multiple of the
            # median: one value that flips between inputs an ulp apart (a tie in an argmax, a
            # threshold) must not loosen the L2 budget for the whole output.
            near_sq += float((own.clamp(max=REFEREE_MEDIAN_ERRORS * median) ** 2).sum().item())
        if diff.numel():
            n_bad += int((diff > allowed).sum().item())
            n_far += int((diff > REFEREE_STRAY_CAP * allowed).sum().item())
            max_abs = max(max_abs, float(diff.max().item()))
        # Where float64 itself is not finite but fp32 is, the fp32 reference is what there is.
        only32 = rc.isfinite() & ~ec.isfinite()
        if bool(only32.any()):
            d = (gc[only32] - rc[only32]).abs()
            n_bad += int((d > tol.rtol * abs_sum / finite_n + tol.rtol * rc[only32].abs()).sum().item())
    err, norm = math.sqrt(err_sq), math.sqrt(exact_sq)
    noise = max(math.sqrt(noise_sq), math.sqrt(near_sq))
    budget = REFEREE_L2_FACTOR * noise + tol.l2_limit * norm
    rel = err / norm if norm > 0 else (0.0 if err == 0 else math.inf)
    own = f"the fp32 reference's own {noise:.3g}" + (f" at most, here and on {near[1]} inputs an ulp apart" if near else "")
    allowance = f"; per element, {REFEREE_POLICY_ERRORS:g}x its error under {under[1]} too" if under is not None else ""
    text = (f"output {i} against the fp64 result: L2 error {err:.3g} ({own}, "
            f"budget {budget:.3g}), {n_bad} of {finite_n} elements beyond tolerance"
            + (f" (the fp32 reference: {ref_bad})" if ref_bad else "") + allowance)
    ok = (n_bad <= REFEREE_L2_FACTOR * ref_bad + finite_n // REFEREE_STRAY_PER
          and n_far <= REFEREE_L2_FACTOR * ref_bad and err <= budget)
    return Mismatch(ok, text, max_abs, rel, n_bad / finite_n)

