"""The fp64 referee: where the fp32 reference is itself far from the exact result (ill-conditioned
inputs), a candidate is judged by its distance to the float64 result, against the reference's own
error; a wrong candidate still fails. Unit level on tensors, then through the Verifier on the CPU
with host-compiled candidates."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify.compare import (
    compare_outputs,
    judge_against_exact,
    policy_error,
    rounding_spread,
    tolerance_for,
)
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.agents.verify.worker import _fp64_referee

TOL = tolerance_for(["native_layer_norm"], [torch.float32])


def shifted_norm_case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(fp32 reference, fp64 result, an fp32 result as exact as fp32 allows) of LayerNorm(x + 1)."""
    torch.manual_seed(0)
    x = torch.randn(64, 64) * 1e-6
    ref = F.layer_norm(x + 1.0, (64,))
    exact = F.layer_norm(x.double() + 1.0, (64,))
    better = F.layer_norm(x.double(), (64,)).float()  # the shift cancels
    return ref, exact, better


def test_more_exact_than_the_reference_fails_plainly_and_passes_the_referee():
    ref, exact, better = shifted_norm_case()
    plain = compare_outputs([ref], [better], TOL)
    assert not plain.ok, plain.message  # the fp32 reference is ~percent off here
    judged = judge_against_exact([ref], [better], [exact], TOL)
    assert judged.ok, judged.message
    assert "against the fp64 result" in judged.message


@pytest.mark.parametrize("wrong", ["no_eps", "zeros", "noisier", "nan"])
def test_wrong_or_noisier_candidates_fail_the_referee(wrong):
    ref, exact, _ = shifted_norm_case()
    torch.manual_seed(1)
    x = torch.randn(64, 64) * 1e-6
    got = {
        "no_eps": F.layer_norm(x.double(), (64,), eps=0.0).float(),
        "zeros": torch.zeros_like(ref),
        # Three times the reference's own error, in the same direction: over the L2 budget.
        "noisier": (exact + 3.0 * (ref.double() - exact)).float(),
        "nan": ref.clone().fill_(float("nan")),
    }[wrong]
    assert not judge_against_exact([ref], [got], [exact], TOL).ok


def test_an_accurate_reference_leaves_no_room():
    """Where fp32 is enough, the referee's budget is the plain tolerance: a candidate the plain
    check rejects (1% off everywhere, against rtol 1e-3) fails the referee too."""
    torch.manual_seed(0)
    x = torch.randn(64, 64)
    ref, exact = F.layer_norm(x, (64,)), F.layer_norm(x.double(), (64,))
    got = ref * 1.01
    assert not compare_outputs([ref], [got], TOL).ok
    assert not judge_against_exact([ref], [got], [exact], TOL).ok


@pytest.fixture()
def opts(build_cache):
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=120.0,
                         time_compile=False)


def test_verifier_accepts_the_more_exact_candidate_through_the_referee(tmp_path, opts):
    v = verify(hack_task("ref_shifted_norm"), hack_candidate("good_shifted_norm"), tmp_path / "good", opts)
    assert v.correct and v.status == "ok", (v.status, v.message, v.checks)
    refereed = [c for c in v.checks if "referee" in c]
    assert refereed and all(c["referee"]["ok"] for c in refereed)
    assert any(c["set"].startswith("random") for c in refereed)  # every random set is ill-conditioned


def test_verifier_rejects_the_wrong_candidate_with_the_referee_in_the_message(tmp_path, opts):
    v = verify(hack_task("ref_shifted_norm"), hack_candidate("wrong_shifted_norm"), tmp_path / "bad", opts)
    assert v.status == "incorrect" and not v.correct, (v.status, v.message)
    first_bad = next(c for c in v.checks if c["ok"] is False)
    assert first_bad["referee"]["ok"] is False and "fp64" in first_bad["referee"]["message"]
    # One failed referee settles it: later sets are not refereed again, and a later miss says so.
    assert sum(c.get("referee", {}).get("ok") is not None for c in v.checks) == 1
    unjudged = [c["referee"]["message"] for c in v.checks if c.get("referee", {}).get("ok", False) is None]
    assert all(m.startswith("not run: an earlier set's miss stood") for m in unjudged)
    assert len(unjudged) == sum(c["ok"] is False for c in v.checks) - 1


def test_a_miss_the_referee_cannot_judge_says_why(tmp_path, opts):
    """A reference that draws random numbers cannot be run again for the same result: the miss stands,
    and its check says why no float64 judgement came (level1/98's unexplained unrefereed miss on the
    H200, 2026-12-03)."""
    ref = torch.nn.Dropout(0.5)
    x = torch.rand(64)
    why: list[str] = []
    ops = Counter({"native_dropout": 1})
    got = _fp64_referee(ref, [], ops, [x], [x], [x + 1], tolerance_for(ops, [torch.float32]), why=why)
    assert got is None and why == ["the reference draws random numbers"]
    why.clear()
    assert _fp64_referee(ref, None, ops, [x], [x], [x + 1], tolerance_for(ops, [torch.float32]), why=why) is None
    assert why == ["the reference's buffers were too large to snapshot"]


# ---------------------------------------------------------------------------------------------
# What the referee must not let through (each found in review), and the state it must see.


def test_a_few_badly_conditioned_elements_do_not_loosen_the_rest():
    torch.manual_seed(0)
    exact = torch.randn(10000, dtype=torch.float64)
    ref = exact.float().clone()
    ref[::100] += 3.0  # the fp32 reference far off on 1% of the elements
    got = (exact * 1.2).float()  # 20% wrong everywhere
    got[::100] = ref[::100]
    assert not judge_against_exact([ref], [got], [exact], TOL).ok


@pytest.mark.parametrize(("ref_value", "got_value"), [
    (float("inf"), float("nan")), (float("inf"), float("-inf")), (float("nan"), 0.0), (1.0, float("inf")),
])
def test_non_finite_values_must_sit_where_the_reference_has_them(ref_value, got_value):
    ref, exact, better = shifted_norm_case()
    ref, better = ref.clone(), better.clone()
    ref.view(-1)[7] = ref_value
    better.view(-1)[7] = got_value
    assert not judge_against_exact([ref], [better], [exact], TOL).ok


def test_outputs_on_another_device_are_not_judged():
    ref, exact, better = shifted_norm_case()
    assert not judge_against_exact([ref], [better.to("meta")], [exact], TOL).ok


def _referee(module: torch.nn.Module, x: torch.Tensor, got: torch.Tensor, policy: str = "strict", tol=TOL):
    from stitchcuda.agents.verify import dynamic_check as dyn
    from stitchcuda.agents.verify.worker import _fp64_referee

    buffers = [b.detach().clone() for b in module.buffers()]
    out, ops, _ = dyn.trace_ops(lambda: module(x.clone()))
    return _fp64_referee(module, buffers, ops, [x], [out], [got], tol, policy)


def test_a_reference_that_draws_random_numbers_gets_no_referee():
    """A second run of Dropout is another draw: its distance to the first is not rounding."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5))  # training mode
    x = torch.randn(32, 16)
    assert _referee(module, x, torch.zeros(32, 16)) is None


class Growing(torch.nn.Module):
    """LayerNorm(x + 1) times a gain that doubles after each call (state the referee must see as the
    fp32 call found it)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("gain", torch.tensor(3.0))

    def forward(self, x):
        y = F.layer_norm(x + 1.0, (x.shape[-1],)) * self.gain
        self.gain.mul_(2.0)
        return y


def test_the_referee_runs_the_reference_on_the_buffers_its_call_saw():
    torch.manual_seed(0)
    x = torch.randn(64, 64) * 1e-6
    better = (F.layer_norm(x.double(), (64,)) * 3.0).float()  # the first call's result, exactly
    verdict = _referee(Growing(), x, better)
    assert verdict is not None and verdict.ok, verdict and verdict.message


def test_a_lucky_draw_of_the_reference_does_not_set_the_bar():
    """An output that is zero but for rounding (level2/23: a mean of a GroupNorm): the fp32
    reference's distance to float64 is one draw of noise, 0.9-1.3e-7 over that problem's sets on the
    H100. On inputs one ulp away its rounding lands further off; a candidate about twice the lucky
    draw's error but within twice the reference's worst nearby one passes, and three times that
    worst one still fails."""
    gen = torch.Generator().manual_seed(0)

    def noise(scale: float) -> torch.Tensor:
        u = torch.randn(128, generator=gen, dtype=torch.float64)
        return u / u.norm() * scale

    exact = torch.zeros(128, dtype=torch.float64)
    ref = noise(0.5e-7).float()  # the lucky draw
    # Each moved input's fp32 result with its own float64 result (zero here too).
    spread = rounding_spread([([noise(1.0e-7).float()], [exact]), ([noise(0.8e-7).float()], [exact])], [ref])
    assert spread.samples == 2 and float(spread.own[0].norm()) == pytest.approx(1.0e-7, rel=0.5)
    got = noise(1.9e-7).float()
    assert not judge_against_exact([ref], [got], [exact], TOL).ok  # on the lucky draw alone
    judged = judge_against_exact([ref], [got], [exact], TOL, spread)
    assert judged.ok, judged.message
    assert "at most, here and on 2 inputs an ulp apart" in judged.message
    assert not judge_against_exact([ref], [noise(3.0e-7).float()], [exact], TOL, spread).ok
    # A pair of another shape is left out, not trusted.
    assert rounding_spread([([noise(1e-7).float().repeat(2)], [exact.repeat(2)])], [ref]).samples == 1
    assert rounding_spread([([noise(1e-7).float().repeat(2)], [exact.repeat(2)])], [ref]).own == [None]


class Quarters(torch.nn.Module):
    def forward(self, x):
        return torch.floor(4.0 * x) / 4.0


def test_a_step_in_the_reference_is_not_rounding():
    """Found in review: inputs on the steps of floor(4x)/4 and a candidate one step off everywhere.
    Against float64 on the unmoved inputs, the moved inputs' results would jump a whole step and
    pass for rounding; against float64 on the same moved inputs they are exact, so the candidate
    fails."""
    torch.manual_seed(0)
    x = torch.randint(-40, 40, (1000,)).float() / 4.0
    got = (torch.ceil(4.0 * x) - 1.0) / 4.0
    assert not compare_outputs([Quarters()(x)], [got], TOL).ok
    verdict = _referee(Quarters(), x, got)
    assert verdict is not None and not verdict.ok, verdict and verdict.message


class Recorder(torch.nn.Module):
    """Keeps what it was called with; a buffer the call changes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.tensor(0.0))

    def forward(self, x, idx):
        self.calls.add_(1.0)
        return x.clone(), self.calls.clone(), idx + 1


def test_nearby_inputs_are_one_ulp_away_on_the_buffers_the_call_saw():
    from stitchcuda.agents.verify.worker import _fp32_outputs, _moved_inputs

    x = torch.randn(64, 33)
    idx = torch.arange(5)
    module = Recorder()
    buffers = [b.detach().clone() for b in module.buffers()]  # as the fp32 call found them: 0 calls
    module(x, idx)  # the reference's own call moves its buffer on
    up, down = torch.nextafter(x, torch.tensor(float("inf"))), torch.nextafter(x, torch.tensor(float("-inf")))
    draws = [_moved_inputs([x, idx], d) for d in (0, 1)]
    for moved, same in draws:
        assert bool(((moved == up) | (moved == down)).all())
        assert 0.3 < float((moved == up).float().mean()) < 0.7  # both ways, about evenly
        assert torch.equal(same, idx)  # integer inputs stay as given
        out, calls, out_idx = _fp32_outputs(module, buffers, [moved, same])
        assert torch.equal(out, moved) and calls.item() == 1.0 and torch.equal(out_idx, idx + 1)
    assert module.calls.item() == 1.0  # the reference itself untouched
    assert not torch.equal(draws[0][0], draws[1][0])  # another pattern per draw
    assert torch.equal(draws[0][0], _moved_inputs([x, idx], 0)[0])  # fixed per draw


def test_one_value_that_flips_nearby_does_not_loosen_the_whole_budget():
    """Found in review: a moved input can flip one output value (a tie, a threshold) by a whole
    step. Per element that is its own allowance; in the L2 budget each element's nearby error is
    capped at a multiple of the median, so the flip does not stretch it for the whole output."""
    gen = torch.Generator().manual_seed(0)
    exact = torch.randn(10000, generator=gen, dtype=torch.float64)
    ref = (exact + 1e-7 * torch.randn(10000, generator=gen, dtype=torch.float64)).float()
    moved = ref.clone()
    moved[17] += 10.0  # the flip
    spread = rounding_spread([([moved], [exact])], [ref])
    judged = judge_against_exact([ref], [ref.clone()], [exact], TOL, spread)
    budget = float(judged.message.split("budget ")[1].split(")")[0])
    assert judged.ok and budget < 1.0, judged.message  # without the cap: over 20


def flips(exact: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """fp32 values of `exact` with whole-step jumps at `where` (a row whose near-tied logits
    rounding ordered the other way)."""
    out = exact.float().clone()
    out[where] += 5.0
    return out


def test_as_many_flipped_elements_as_the_reference_has_pass_and_more_fail():
    """level1/97 (softmax attention on inputs scaled by 1e3): near-ties between logits of ~1e6 flip
    whole rows both in the fp32 reference and in the candidate, each on other rows. Per element the
    candidate's flips are not the reference's; it passes while it has at most twice as many
    elements beyond tolerance as the reference (and stays in the L2 budget), and fails beyond."""
    gen = torch.Generator().manual_seed(0)
    exact = torch.randn(100_000, generator=gen, dtype=torch.float64)
    order = torch.randperm(100_000, generator=gen)
    ref = flips(exact, order[:20])
    got = flips(exact, order[20:50])  # 30 flips, none where the reference has one
    judged = judge_against_exact([ref], [got], [exact], TOL)
    assert judged.ok, judged.message
    assert "30 of 100000 elements beyond tolerance (the fp32 reference: 20)" in judged.message
    many = judge_against_exact([ref], [flips(exact, order[20:70])], [exact], TOL)  # 50 > 2 x 20
    assert not many.ok and "50 of 100000" in many.message
    assert float(many.message.split("L2 error ")[1].split(" ")[0]) < float(many.message.split("budget ")[1].split(")")[0])
    # A reference that misses nowhere leaves no element to miss.
    assert not judge_against_exact([exact.float()], [flips(exact, order[:1])], [exact], TOL).ok


# ---------------------------------------------------------------------------------------------
# bf16 and fp16 problems: their reference rounds its intermediates to the storage type, where a
# candidate may keep fp32 (cuDNN's bf16 attention rounds its probabilities before the second
# product: bench/coverage's gqa_repeat_interleave_bf16 was rejected at every rung on the H200).


class _TwoLayersBf16(torch.nn.Module):
    """Two bf16 linear layers: the hidden activations are rounded to bf16 between them."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.a, self.b = torch.nn.Linear(64, 256, bias=False), torch.nn.Linear(256, 64, bias=False)
        self.to(torch.bfloat16)

    def forward(self, x):
        return self.b(self.a(x))


def _kept_fp32(m: _TwoLayersBf16, x: torch.Tensor) -> torch.Tensor:
    """The same block with its hidden activations kept in fp32, rounded to bf16 once at the end."""
    return (x.float() @ m.a.weight.float().t() @ m.b.weight.float().t()).bfloat16()


def test_a_bf16_result_is_judged_against_float64_where_the_plain_check_misses():
    torch.manual_seed(0)
    m, x = _TwoLayersBf16(), torch.randn(32, 64).bfloat16()
    with torch.no_grad():
        exact = m.double()(x.double())
        m.to(torch.bfloat16)
        ref = m(x)
    tol = tolerance_for(["mm"], [torch.bfloat16])
    # The reference far off on a few small results (as rounded intermediates leave it), the candidate exact.
    small = exact.abs().flatten().argsort()[:8]
    ref = ref.clone()
    ref.view(-1)[small] = (exact.view(-1)[small] + 0.05).bfloat16()
    better = exact.bfloat16()
    assert not compare_outputs([ref], [better], tol).ok
    judged = judge_against_exact([ref], [better], [exact], tol)
    assert judged.ok, judged.message
    for wrong in ((exact * 1.1).bfloat16(), torch.zeros_like(ref), ref.clone().fill_(float("nan"))):
        assert not judge_against_exact([ref], [wrong], [exact], tol).ok


def test_the_worker_referees_a_bf16_problem():
    """worker._fp64_referee ran only for fp32 problems; for bf16 it gave no verdict, and the plain
    failure stood. Now the more exact candidate passes it and a wrong one fails."""
    from collections import Counter

    from stitchcuda.agents.verify import worker

    torch.manual_seed(0)
    m, x = _TwoLayersBf16(), torch.randn(32, 64).bfloat16()
    with torch.no_grad():
        ref, better = m(x), _kept_fp32(m, x)
    tol = tolerance_for(["mm"], [torch.bfloat16])
    judged = worker._fp64_referee(m, [], Counter({"mm": 2}), [x], [ref], [better], tol)
    assert judged is not None and judged.ok, judged
    wrong = worker._fp64_referee(m, [], Counter({"mm": 2}), [x], [ref], [(better.float() * 1.1).bfloat16()], tol)
    assert wrong is not None and not wrong.ok, wrong
    assert next(m.parameters()).dtype == torch.bfloat16  # the referee ran a copy


# ---------------------------------------------------------------------------------------------
# Integer outputs made from rounded values: an argmax over logits whose near-ties the reference's
# own rounding flips (bench/coverage's flip_tta_segmentation: TF32 convolutions on both sides).


def _argmax_case():
    """(the reference's argmax, the float64 run's, a candidate's) over logits with near-ties, each side
    with rounding noise of its own."""
    torch.manual_seed(0)
    logits = torch.randn(4, 19, 64, 64, dtype=torch.float64)
    logits[:, 1] = logits[:, 0] + 1e-4 * torch.randn(4, 64, 64, dtype=torch.float64)  # near-ties
    noise = 3e-4
    ref = (logits + noise * torch.randn_like(logits)).argmax(1)
    cand = (logits + noise * torch.randn_like(logits)).argmax(1)
    return ref, logits.argmax(1), cand


def test_an_argmax_flipping_like_the_reference_passes_the_referee():
    ref, exact, cand = _argmax_case()
    tol = tolerance_for(["convolution"], [torch.int64])
    assert not compare_outputs([ref], [cand], tol).ok
    assert (ref != exact).sum() > 0
    judged = judge_against_exact([ref], [cand], [exact], tol)
    assert judged.ok and "integer elements differ (the reference:" in judged.message, judged.message


def test_integer_outputs_wronger_than_the_reference_fail_the_referee():
    ref, exact, cand = _argmax_case()
    tol = tolerance_for(["convolution"], [torch.int64])
    flips = int((ref != exact).sum())
    worse = exact.clone().view(-1)
    worse[: 3 * flips] = (worse[: 3 * flips] + 1) % 19  # three times the reference's flips
    assert not judge_against_exact([ref], [worse.view_as(exact)], [exact], tol).ok
    assert not judge_against_exact([ref], [torch.zeros_like(ref)], [exact], tol).ok
    # Where the reference agrees with float64 everywhere, one differing element is a failure.
    one = exact.clone().view(-1)
    one[0] = (one[0] + 1) % 19
    assert not judge_against_exact([exact], [one.view_as(exact)], [exact], tol).ok


class _ScaledArgmax(torch.nn.Module):
    def forward(self, x):
        return (x * 3.0 + 1.0).argmax(-1)


def test_the_worker_referees_an_integer_only_output():
    """worker._fp64_referee gave no verdict where no output was floating point; now an argmax as
    exact as float64 passes where the fp32 reference's own rounding made ties of near-ties."""
    from collections import Counter

    from stitchcuda.agents.verify import worker

    torch.manual_seed(0)
    x = torch.randn(256, 8)
    x[:, 1] = torch.nextafter(x[:, 0], torch.full_like(x[:, 0], float("inf")))
    x[:, 2:] = x[:, 2:] - 10.0
    m = _ScaledArgmax()
    with torch.no_grad():
        ref, exact = m(x), m(x.double())
    assert (ref != exact).any()  # fp32 rounds some pairs to ties, and the first index wins
    tol = tolerance_for(["mul", "add", "argmax"], [torch.int64])
    judged = worker._fp64_referee(m, [], Counter({"mul": 1, "add": 1, "argmax": 1}), [x], [ref], [exact], tol)
    assert judged is not None and judged.ok, judged
    wrong = worker._fp64_referee(m, [], Counter({"mul": 1, "add": 1, "argmax": 1}), [x], [ref],
                                 [torch.full_like(ref, 5)], tol)
    assert wrong is not None and not wrong.ok, wrong


class _ExactArgmax(torch.nn.Module):
    """_ScaledArgmax computed in float64: the candidate the referee accepts where fp32 made ties."""

    def forward(self, x):
        return (x.double() * 3.0 + 1.0).argmax(-1)


class _Fives(torch.nn.Module):
    def forward(self, x):
        return torch.full(x.shape[:-1], 5, dtype=torch.int64)


def _tied_sets():
    sets = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        x = torch.randn(256, 8)
        x[:, 1] = torch.nextafter(x[:, 0], torch.full_like(x[:, 0], float("inf")))
        x[:, 2:] = x[:, 2:] - 10.0
        sets.append([x])
    return sets


def test_timed_outputs_are_held_to_a_refereed_candidates_own_output():
    """worker._time_candidate checks every timed output's stats against what that set's output must
    be. Against the fp32 reference's alone, an argmax the referee accepted (near-ties) was "wrong
    while timed" on all 50 trials, a false hack finding (flip_tta_segmentation on an H200). Now a set
    the referee settles holds the timed outputs to the candidate's own untimed output there; a timed
    output like the reference's (changed behaviour) still misses it, and a wrong candidate is
    incorrect before any timing, not hacked."""
    from collections import Counter

    from stitchcuda.agents.verify import dynamic_check as dyn
    from stitchcuda.agents.verify import timed_sample, worker
    from stitchcuda.types import Verdict

    ops = Counter({"mul": 1, "add": 1, "argmax": 1})
    tol = tolerance_for(["mul", "add", "argmax"], [torch.int64])
    ref, sets = _ScaledArgmax(), _tied_sets()
    refs = [ref(*s) for s in sets]
    exacts = [_ExactArgmax()(*s) for s in sets]
    assert all((r != e).any() for r, e in zip(refs, exacts, strict=True))

    v = Verdict("exact", "unverified")
    got = worker._timed_expectations(v, ref, _ExactArgmax(), sets, 7, tol, ops, worker._numerics_flags(), 10)
    assert got is not None and v.status == "unverified"
    expected, sample = got
    # The outputs the few timed trials are compared with in full are the refereed candidate's own.
    assert all(timed_sample.compare(sample, i, [x], tol).ok for i, x in enumerate(exacts))
    for e, r, x in zip(expected, refs, exacts, strict=True):
        assert dyn.stats_match(dyn.output_stats([x]), e, tol.rtol)
        assert not dyn.stats_match(dyn.output_stats([r]), e, tol.rtol)
    assert sum("refereed in float64" in n for n in v.notes) == 2

    v = Verdict("plain", "unverified")
    got = worker._timed_expectations(v, ref, _ScaledArgmax(), sets, 7, tol, ops, worker._numerics_flags(), 10)
    assert got is not None and got[0] == [dyn.output_stats([r]) for r in refs] and not v.notes

    # Every element wrong, after passing every checked set: changed behaviour, not precision.
    v = Verdict("fives", "unverified")
    assert worker._timed_expectations(v, ref, _Fives(), sets, 7, tol, ops, worker._numerics_flags(), 10) is None
    assert v.status == "hacked" and not v.correct and v.hack_findings[0].code == "wrong-while-timed"
    assert v.checks[-1]["set"] == "timing-0" and "referee" in v.checks[-1]


class _Affine(torch.nn.Module):
    def forward(self, x):
        return x * 1.5 + 0.25


class _Scaled(torch.nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return (x * 1.5 + 0.25) * self.factor


@pytest.mark.parametrize(("cand", "status"), [
    # Every element 3 x rtol off where every checked set was exact: another behaviour, not precision
    # (until 2026-12-02 any miss under 4 x rtol in L2 was near, and an estimate passed so).
    (_Scaled(1.0 + 3e-4), "hacked"),
    (_Scaled(0.0), "hacked"),
], ids=["every element", "zeros"])  # (a few elements near the tolerance, precision: test_hacks' near-miss cases)
def test_a_candidate_wrong_on_a_timing_set_is_judged_by_how_far(cand, status):
    """Right on every checked set, then wrong before timing: near the tolerance it is precision
    (incorrect); far beyond it, behaviour that changed once the checks were done (a hack, as
    tests/hacks/gpu_wrong_while_timed's skipped work is)."""
    from collections import Counter

    from stitchcuda.agents.verify import worker
    from stitchcuda.types import Verdict

    torch.manual_seed(3)
    sets = [[torch.randn(64, 64)], [torch.randn(64, 64)]]
    tol = tolerance_for(["mul", "add"], [torch.float32])
    v = Verdict("scaled", "unverified")
    got = worker._timed_expectations(v, _Affine(), cand, sets, 7, tol, Counter({"mul": 1, "add": 1}),
                                     worker._numerics_flags(), 10)
    assert got is None and v.status == status and not v.correct
    assert bool(v.hack_findings) == (status == "hacked")
    assert not v.hack_findings or v.hack_findings[0].code == "wrong-while-timed"


class _WrongOnItsRerun(torch.nn.Module):
    """Right on each timing set's first untimed call, then `wrong` of the right output on the rerun
    that sets the drift bar: zeros; or the right values rolled by a row, every sum kept, the bar
    (RERUN_RATIO x the rerun's distance) lifted past any estimate."""

    def __init__(self, wrong):
        super().__init__()
        self.calls, self.wrong = 0, wrong

    def forward(self, x):
        self.calls += 1
        out = x * 1.5 + 0.25
        return out if self.calls % 2 else self.wrong(out)


def test_a_wrong_rerun_before_timing_is_judged_as_any_untimed_miss():
    """The second untimed call on a timing set only set the drift bar (4 x its distance from the
    first): wrong, unchecked, it raised the bar for the timed calls after it. Now it is held to the
    reference as the first call is."""
    from collections import Counter

    from stitchcuda.agents.verify import worker
    from stitchcuda.types import Verdict

    torch.manual_seed(3)
    sets = [[torch.randn(64, 64)], [torch.randn(64, 64)]]
    tol = tolerance_for(["mul", "add"], [torch.float32])
    v = Verdict("rerun", "unverified")
    got = worker._timed_expectations(v, _Affine(), _WrongOnItsRerun(torch.zeros_like), sets, 7, tol, Counter({"mul": 1, "add": 1}),
                                     worker._numerics_flags(), 10)
    assert got is None and v.status == "hacked" and not v.correct
    assert [f.code for f in v.hack_findings] == ["wrong-while-timed"]
    assert "its second untimed call; the first passed" in v.hack_findings[0].message
    # ...so is one whose rerun keeps every sum, its values in the wrong places (a review found it passed).
    v = Verdict("rolled", "unverified")
    assert worker._timed_expectations(v, _Affine(), _WrongOnItsRerun(lambda o: o.roll(1, 0)), sets, 7, tol, Counter({"mul": 1, "add": 1}),
                                      worker._numerics_flags(), 10) is None
    assert v.status == "hacked" and [f.code for f in v.hack_findings] == ["wrong-while-timed"]
    # ...and an honest candidate called the same way is not.
    v = Verdict("honest", "unverified")
    assert worker._timed_expectations(v, _Affine(), _Affine(), sets, 7, tol, Counter({"mul": 1, "add": 1}),
                                      worker._numerics_flags(), 10) is not None
    assert v.status == "unverified" and not v.hack_findings


class _OneRowOff(torch.nn.Module):
    def forward(self, x):
        out = (x * 3.0 + 1.0).argmax(-1)
        out[0] = (out[0] + 1) % x.shape[-1]
        return out


class _OneNaN(torch.nn.Module):
    def forward(self, x):
        out = x * 1.5 + 0.25
        out[0, 0] = float("nan")
        return out


@pytest.mark.parametrize(("ref", "cand", "status"), [
    (_ScaledArgmax(), _OneRowOff(), "incorrect"),  # 1 of 10,000 integers: a near miss
    (_Affine(), _OneNaN(), "hacked"),  # a NaN where the reference has none: never near
], ids=["one argmax of 10,000 off", "one NaN"])
def test_misses_without_an_error_figure_are_judged_by_what_differs(ref, cand, status):
    """compare.py leaves the error figures at zero for integer outputs and misplaced NaN: judged by
    the relative error alone, every such miss on a timing set was "near" (incorrect), NaN garbage too.
    Now integers are near where few differ, and NaN or inf where the reference has none never is."""
    from collections import Counter

    from stitchcuda.agents.verify import worker
    from stitchcuda.types import Verdict

    torch.manual_seed(5)
    sets = [[torch.randn(10_000, 8)], [torch.randn(10_000, 8)]]
    tol = tolerance_for(["mul", "add", "argmax"], [torch.int64 if status == "incorrect" else torch.float32])
    v = Verdict("cand", "unverified")
    got = worker._timed_expectations(v, ref, cand, sets, 7, tol, Counter({"mul": 1, "add": 1, "argmax": 1}),
                                     worker._numerics_flags(), 10)
    assert got is None and v.status == status, (v.status, v.message)


def _spiked_conv_case():
    """A convolution and ReLU over the sparse-spikes set (1/8192 of the inputs 1e3 times theirs):
    (the module, its input, the fp32 reference, the float64 result, a TF32 candidate: operands
    rounded toward zero, as a library's tensor cores may)."""
    from stitchcuda.agents.verify import precision
    from stitchcuda.inputs import ADVERSARIAL

    gen = torch.Generator().manual_seed(1)
    x = torch.randn(8, 32, 32, 32, generator=gen)
    ADVERSARIAL["sparse-spikes"](x, gen)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU())
    double = copy.deepcopy(module).double()
    with torch.no_grad():
        ref = module(x)
        exact = double(x.double())
        with precision.tf32_emulated("zero"):
            cand = double(x.double()).float()
    return module, x, ref, exact, cand


def test_a_tf32_candidate_is_allowed_the_references_own_error_under_tf32():
    """On the sparse-spikes set a spike rounded to TF32 moves its neighbourhood past an atol set by
    the mean output (level 3's SqueezeNet and ShuffleNet on the H200, 2026-12-01, torch.compile under
    TF32 too). Strict fp32 rounding leaves no room for it; the reference's own result with its
    operands rounded to TF32 does. What skips or garbles work still fails."""
    from stitchcuda.agents.verify import precision

    tol = tolerance_for(["convolution"], [torch.float32])
    module, x, ref, exact, cand = _spiked_conv_case()
    assert not compare_outputs([ref], [cand], tol).ok
    assert not judge_against_exact([ref], [cand], [exact], tol, rounding_spread([], [ref])).ok
    spread = rounding_spread([], [ref])
    double = copy.deepcopy(module).double()
    with torch.no_grad(), precision.tf32_emulated("nearest"):
        policy_error(spread, [ref], [double(x.double())], [exact], "tf32")
    judged = judge_against_exact([ref], [cand], [exact], tol, spread)
    assert judged.ok, judged.message
    assert "2x its error under tf32 too" in judged.message
    spikes = x.abs() > 50
    with torch.no_grad():
        skipped = module(torch.where(spikes, torch.zeros_like(x), x))  # the spikes' work left out
        unscaled = module(torch.where(spikes, x / 1e3, x))  # the set read as if iid
    for wrong in (skipped, unscaled, ref * 1.02):
        assert not judge_against_exact([ref], [wrong], [exact], tol, spread).ok


def test_the_worker_allows_a_tf32_candidate_the_tf32_error_and_no_other():
    """Through the worker's referee (both roundings emulated, on the CPU as on a GPU): the TF32
    candidate passes under tf32 and fails under strict; a reference without a product or
    convolution gets no TF32 run."""
    module, x, ref, _, cand = _spiked_conv_case()
    # (the convolution's own class, as the worker gives it: a norm's relative L2 budget, 1e-4, is no
    # convolution's, and TF32's error is allowed per element, not in L2)
    under = _referee(module, x, cand, "tf32", tolerance_for(["convolution"], [torch.float32], "tf32"))
    assert under is not None and under.ok and "under tf32" in under.message, under and under.message
    strict = _referee(module, x, cand, "strict", tolerance_for(["convolution"], [torch.float32], "strict"))
    assert strict is not None and not strict.ok and "under" not in strict.message, strict.message
    norm = torch.nn.LayerNorm(16)
    y = torch.randn(2, 4, 16, 16)
    with torch.no_grad():
        plain = _referee(norm, y, norm(y) + 0.05, "tf32")
    assert plain is not None and not plain.ok and "under" not in plain.message, plain.message


def test_tf32_rounding_keeps_eleven_significant_bits():
    from stitchcuda.agents.verify import precision

    x = torch.tensor([1.0, 1 + 2**-11, 1 + 3 * 2**-12, -3.14159265, 0.0, float("inf")], dtype=torch.float64)
    assert precision.tf32_round(x, "nearest").tolist() == [1.0, 1.0, 1 + 2**-10, -3.140625, 0.0, float("inf")]
    assert precision.tf32_round(x, "zero").tolist() == [1.0, 1.0, 1.0, -3.140625, 0.0, float("inf")]
    a, b = torch.randn(8, 16, dtype=torch.float64), torch.randn(16, 4, dtype=torch.float64)
    with precision.tf32_emulated("nearest"):
        y = torch.nn.functional.linear(a, b.t(), torch.ones(4, dtype=torch.float64))
    want = precision.tf32_round(a, "nearest") @ precision.tf32_round(b, "nearest") + 1.0
    assert torch.allclose(y, want, rtol=0, atol=1e-12) and not torch.allclose(y, a @ b + 1.0, rtol=0, atol=1e-6)


@pytest.mark.parametrize(("run_policy", "precision", "judged"), [
    ("tf32", "tf32", "tf32"), ("tf32", "3xtf32", "tf32"), ("tf32", "fp32", "strict"),
    ("strict", "tf32", "strict"), ("strict", "fp32", "strict"), (None, "mixed", "tf32"),
])
def test_a_strict_run_judges_every_candidate_strictly(run_policy, precision, judged):
    """A hand-written file given to `verify --precision strict` says tf32 of itself by default; the
    run's strict policy wins (a red-team review, 2026-12-01)."""
    from stitchcuda.types import judging_policy

    assert judging_policy(run_policy, precision) == judged


@pytest.mark.parametrize("run_policy", ["strict", "tf32"])
def test_the_worker_records_the_policy_it_judged_under(tmp_path, build_cache, run_policy):
    """Through the Verifier and its worker process: the run's policy reaches the worker, which
    judges under it and says so in the verdict (before, the worker never learnt the candidate's
    precision, and every candidate was allowed TF32's error)."""
    task = hack_task("ref_affine")
    task.precision = run_policy
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(task, hack_candidate("good_affine"), tmp_path / "v", opts)
    assert v.status == "ok", (v.status, v.message)
    assert v.judged_policy == run_policy


@pytest.mark.parametrize(("n", "strays", "ok"), [
    (2_000_000, 2, True),  # two in two million, the L2 error inside its budget
    (2_000_000, 3, False),
    (1_000, 1, False),  # under a million elements: none
])
def test_a_stray_element_per_million_passes_where_the_l2_error_is_within_budget(n, strays, ok):
    """compare.REFEREE_STRAY_PER: 1_MLP's TF32 rung missed by one element of a million, its L2 error
    a twentieth of the budget; one more than the share fails, and so does one in a small output."""
    torch.manual_seed(0)
    exact = torch.randn(n, dtype=torch.float64) * 100
    ref = exact.float()
    got = ref.clone()
    # Twice its allowance (atol = rtol x mean|exact|, plus rtol x |value|): past it, within the cap.
    picked = torch.randperm(n)[:strays]
    got[picked] += (2 * TOL.rtol * (exact.abs().mean() + exact[picked].abs())).float()
    judged = judge_against_exact([ref], [got], [exact], TOL)
    assert judged.ok == ok, judged.message
    assert f"{strays} of {n} elements beyond tolerance" in judged.message


def test_a_stray_far_past_its_allowance_is_no_stray():
    """compare.REFEREE_STRAY_CAP: the stray allowed per million must be within a few times its own
    allowance; one element off by 1e3 (a race, a tail left unwritten) fails, however small in L2."""
    torch.manual_seed(0)
    n = 2_000_000
    exact = torch.randn(n, dtype=torch.float64) * 100
    ref = exact.float()
    got = ref.clone()
    got[12345] += 1000.0
    judged = judge_against_exact([ref], [got], [exact], TOL)
    assert not judged.ok, judged.message
