"""draw_tracking: outputs that do not follow the reference's from one random draw to the next (an
estimate near what any draw gives) against rounding, on outputs built to each case."""

from __future__ import annotations

import torch

from stitchcuda.agents.verify import draw_tracking


def _tracked(pairs) -> draw_tracking.DrawTracker:
    t = draw_tracking.DrawTracker()
    for r, c in pairs:
        t.add([r], [c])
    return t


def _draws(n: int, seed: int, move: float, base: float = 1.0, shape=(1,)):
    g = torch.Generator().manual_seed(seed)
    return [base + move * torch.randn(shape, generator=g, dtype=torch.float64).float() for _ in range(n)]


def test_an_output_near_any_draws_value_is_found_and_rounding_is_not():
    """A loss of 1 +- 2e-4 between draws: the reference's own value at fp32 rounding passes; a value
    that keeps 5% of the draw's movement (an estimate from a small sample) is found."""
    refs = _draws(5, 0, 2e-4)
    rounded = [r * (1 + 1e-7) for r in refs]
    assert draw_tracking.findings(_tracked(zip(refs, rounded, strict=True))) == []
    estimate = [1.0 + 0.05 * (r - 1.0) for r in refs]
    (f,) = draw_tracking.findings(_tracked(zip(refs, estimate, strict=True)))
    assert f.code == "draws-not-followed" and f.data["draws"] == 5 and f.data["error"] > 1e-4


def test_a_product_that_keeps_the_row_and_column_effects_only_is_found():
    """rowsum x colsum / K for uniform inputs: most of each entry's movement, not the interaction
    (about a seventh of its variance): found, where the exact product (rounded) is not."""
    g = torch.Generator().manual_seed(1)
    refs, ests = [], []
    for _ in range(5):
        a, b = torch.rand(16, 4096, generator=g), torch.rand(4096, 16, generator=g)
        refs.append(a @ b)
        ests.append(a.sum(1, keepdim=True) * b.sum(0, keepdim=True) / 4096)
    assert draw_tracking.findings(_tracked(zip(refs, [r.clone() for r in refs], strict=True))) == []
    (f,) = draw_tracking.findings(_tracked(zip(refs, ests, strict=True)))
    assert f.data["error"] > 10 * draw_tracking.TRACK_FLOOR


def test_a_proportional_bias_is_no_finding():
    """A truncating library's TF32 on positive operands scales a long product by about 1 - 2^-10: an
    error proportional to the output, which cancels none of its movement between draws, however
    little the draws move a mean of it."""
    g = torch.Generator().manual_seed(4)
    refs = [(torch.rand(8, 1 << 14, generator=g) @ torch.rand(1 << 14, 8, generator=g)) for _ in range(5)]
    biased = [r * (1 - 2**-10) for r in refs]
    assert draw_tracking.findings(_tracked(zip(refs, biased, strict=True))) == []
    means = [r.mean().reshape(1) for r in refs]
    assert draw_tracking.findings(_tracked(zip(means, [m * (1 - 2**-10) for m in means], strict=True))) == []


def test_noise_as_large_as_the_movement_is_rarely_a_finding_over_eleven_draws():
    """A scalar whose honest error is as large as its movement between draws (a float atomicAdd of a
    million partial sums of a 1e9-element loss) and unrelated to it: Student's t with 9 degrees of
    freedom past TRACK_T about 0.15% of the time; an estimate keeping 5% of the movement, with noise
    of its own, is found on nearly every run."""
    g = torch.Generator().manual_seed(5)
    honest = estimate = 0
    for _ in range(200):
        pairs_h, pairs_e = [], []
        for _ in range(5 + draw_tracking.EXTRA_DRAWS):
            t = 3e-5 * torch.randn(1, generator=g, dtype=torch.float64)
            pairs_h.append(((1 + t).float(), (1 + t + 3e-5 * torch.randn(1, generator=g, dtype=torch.float64)).float()))
            s = t + 2.4e-4 * torch.randn(1, generator=g, dtype=torch.float64)
            pairs_e.append(((1 + t).float(), (1 + 0.05 * s).float()))
        honest += bool(draw_tracking.findings(_tracked(pairs_h)))
        estimate += bool(draw_tracking.findings(_tracked(pairs_e)))
    assert honest <= 2 and estimate >= 190, (honest, estimate)


def test_aggregates_are_outputs_of_a_few_elements_in_all():
    assert draw_tracking.aggregate([torch.ones(()), torch.ones(3), torch.arange(100)])  # (integers left out)
    assert not draw_tracking.aggregate([torch.ones(40), torch.ones(40)])
    assert not draw_tracking.aggregate([torch.arange(3)])


def test_nothing_is_said_of_few_draws_an_unmoving_reference_or_rounding_under_the_floor():
    refs = _draws(5, 2, 2e-4)
    estimate = [torch.ones(1) for _ in refs]
    assert draw_tracking.findings(_tracked(zip(refs[:2], estimate[:2], strict=True))) == []
    still = [torch.ones(3) for _ in range(5)]
    assert draw_tracking.findings(_tracked(zip(still, [s * (1 + 1e-6) for s in still], strict=True))) == []
    tiny = _draws(5, 3, 1e-7)  # moves at rounding's scale: an error of 1e-6 is under TRACK_FLOOR
    assert draw_tracking.findings(_tracked(zip(tiny, [t * (1 + 1e-6) for t in tiny], strict=True))) == []


def test_the_places_are_kept_per_output_and_drawn_in_secret():
    a, b = draw_tracking.DrawTracker(), draw_tracking.DrawTracker()
    x = torch.arange(1 << 20, dtype=torch.float32)
    a.add([x], [x])
    a.add([x + 1], [x + 1])
    b.add([x], [x])
    assert len(a.draws[0][0]) == draw_tracking.TRACK_ELEMENTS
    assert torch.equal(a.draws[1][0] - a.draws[0][0], torch.ones(draw_tracking.TRACK_ELEMENTS, dtype=torch.float64))
    assert not torch.equal(a.draws[0][0], b.draws[0][0])  # another tracker, other places


def test_a_scalar_repeating_on_two_draws_is_chance_and_many_elements_repeating_is_a_cache():
    """A scalar loss moving a few thousand ulps between draws repeats on two of 11 by chance, the
    reference's own rounding then differing: no finding. The same repeat over many elements is a
    cache; one output for every draw is one still, however small."""
    from stitchcuda.agents.verify.worker import FEW_ELEMENTS, _follow_inputs_findings

    ref = [f"r{k}" for k in range(11)]
    cand = [f"c{k}" for k in range(11)]
    cand[7] = cand[3]
    assert _follow_inputs_findings(ref, cand, True, elements=1) == []
    found = _follow_inputs_findings(ref, cand, True, elements=FEW_ELEMENTS)
    assert [f.code for f in found] == ["cached-output"] and "set 7 repeats the output for set 3" in found[0].message
    same = ["c"] * 11
    assert [f.code for f in _follow_inputs_findings(ref, same, True, elements=1)] == ["cached-output"]
    assert [f.code for f in _follow_inputs_findings(ref, same, False, elements=1)] == ["input-independent-output"]


def test_a_movement_below_the_references_own_error_is_not_judged():
    """Logits that move 1e-4 between draws on top of 100.3, quantized as TF32 rounds a value of that
    size (an ulp of 1/16) (an honest TF32 network, VGG16 on the H100, 2026-12-07): the candidate's error cancels
    the movement, and is found; but the reference's own error under TF32 is as large as the movement,
    so own_share says the movement is rounding (the worker then notes it and finds nothing). An
    estimate of a movement of 1e-2, against a reference whose own error is fp32 rounding alone, stands."""
    refs = _draws(11, 3, 1e-4, base=100.3, shape=(64,))
    step = 2.0 ** -4
    quantized = [torch.round(r / step) * step for r in refs]
    tracker = _tracked(zip(refs, quantized, strict=True))
    assert draw_tracking.findings(tracker)  # (what the check alone says)
    exact = [refs[0].double()]
    share = draw_tracking.own_share(tracker, [refs[0]], exact, [[torch.round(exact[0] / step) * step]])
    assert share is not None and share >= draw_tracking.RESOLVE_SHARE, share
    refs = _draws(11, 4, 1e-2, base=100.3, shape=(64,))
    estimate = [100.3 + 0.05 * (r - 100.3) for r in refs]
    tracker = _tracked(zip(refs, estimate, strict=True))
    assert draw_tracking.findings(tracker)
    share = draw_tracking.own_share(tracker, [refs[0]], [refs[0].double() * (1 + 1e-9)], [])
    assert share is not None and share < draw_tracking.RESOLVE_SHARE, share
