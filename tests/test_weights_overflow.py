"""The weights-changed checks judge nothing where the reference's own outputs overflow under the
changed weights (worker._check_weights_followed): which elements reach infinity is then each
computation's rounding's choice. Seen on the H200 (level 3, 2026-12-05): Mamba2's exponentials with
a few rows times 4 took an honest candidate to a false stale-weights finding.

Real worker, real C++ kernel, on the CPU: the reference is exp(linear(...)) with weights that keep
it finite on every checked set; the candidate computes exp(x W^T) * exp(-20), equal where finite, and
overflowing on elements the reference keeps finite once a few rows are times 4."""

from __future__ import annotations

import pytest
import torch
from conftest import HACKS, hack_candidate, hack_task

from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.agents.verify.worker import _overflowed_past_range
from stitchcuda.task import import_file


@pytest.fixture()
def opts(build_cache):
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=240.0,
                         time_compile=False)


def test_the_reference_overflows_only_with_a_few_rows_times_four():
    """The premise, checked on the reference itself: finite on a random set and on one 1000 times
    larger; with half of a few rows of the weight times 4, some outputs infinite, and where the
    candidate's split overflows (exp(x W^T) alone past float32) the reference is still finite."""
    ref = import_file(HACKS / "ref_exp_linear.py")
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs())
    x = ref.get_inputs()[0]
    with torch.no_grad():
        assert model(x).isfinite().all() and model(1e3 * x).isfinite().all()
        model.linear.weight[:4, :32] *= 4.0
        out = model(x)
        logits = torch.sigmoid(2.0 * x) @ model.linear.weight.T
    assert not out.isfinite().all()
    split_overflows = logits > 88.72
    assert (split_overflows & out.isfinite()).any()


def test_an_honest_candidate_is_not_stale_where_the_reference_overflows(tmp_path, opts):
    v = verify(hack_task("ref_exp_linear"), hack_candidate("good_exp_linear_split"), tmp_path / "v", opts)
    assert v.accepted and v.status == "ok", (v.status, v.message, v.hack_findings)
    # The rows set: the reference overflows on most draws of its secret rows (not judged); on the
    # rest only the candidate does, past the square root of float32's range (judged over the others).
    rows = [n for n in v.notes if n.startswith("weights-changed-rows set")]
    assert any("not judged: the reference's own outputs overflowed" in n or "judged over the others" in n
               for n in rows), v.notes
    # The checked sets and the weights-changed sets that did not overflow were judged and passed.
    assert all(c["ok"] for c in v.checks if not c["set"].startswith("weights-changed")), v.checks
    assert any(c["set"] == "weights-changed" and c["ok"] for c in v.checks), v.checks


def test_only_the_candidate_overflowing_past_the_square_root_of_the_range_is_judged_over_the_rest(tmp_path, opts):
    """The reference stays finite on every weights-changed set (its logits after the shift below
    float32's exp range), the split candidate overflows on the rows and other-rows sets' rows: those elements, where
    the reference lies past 1.8e19, are taken as the reference's, and the set is judged (and passes)
    over the others."""
    v = verify(hack_task("ref_exp_linear_edge"), hack_candidate("good_exp_linear_split"), tmp_path / "v", opts)
    assert v.accepted and v.status == "ok", (v.status, v.message, v.hack_findings)
    assert not [n for n in v.notes if "not judged" in n], v.notes
    for name in ("weights-changed-rows", "weights-changed-other-rows"):
        assert any(n.startswith(f"{name} set: ") and "judged over the others" in n for n in v.notes), (name, v.notes)
    assert all(c["ok"] for c in v.checks), v.checks


def test_a_stale_candidate_is_still_stale_on_the_rows_set(tmp_path, opts):
    """The same reference, a candidate that keeps the first weights' copy: the mended elements are
    only the candidate's own infinities, so a stale copy (finite where the reference moved) is judged
    as before."""
    v = verify(hack_task("ref_exp_linear_edge"), hack_candidate("hack_exp_linear_stale"), tmp_path / "v", opts)
    assert v.status == "hacked", (v.status, v.message, v.notes)
    assert any(f.code == "stale-weights" for f in v.hack_findings), v.hack_findings


def test_only_infinities_of_the_same_sign_past_the_square_root_of_the_range_are_mended():
    edge = torch.finfo(torch.float32).max ** 0.5
    ref = torch.tensor([1.0, 2.0 * edge, -2.0 * edge, 3.0])
    inf = float("inf")
    mended = _overflowed_past_range([ref], [torch.tensor([1.0, inf, -inf, 3.0])])
    assert mended is not None and mended[1] == 2 and torch.equal(mended[0][0], ref)
    assert _overflowed_past_range([ref], [ref.clone()]) is None  # nothing to mend
    # An infinity where the reference is below the edge, or of the other sign: not mended at all.
    assert _overflowed_past_range([ref], [torch.tensor([1.0, inf, -inf, inf])]) is None
    assert _overflowed_past_range([ref], [torch.tensor([1.0, -inf, -inf, 3.0])]) is None
    # Where the reference is infinite too, the candidate's infinity is the compare's to judge.
    assert _overflowed_past_range([torch.tensor([inf, 2.0 * edge])], [torch.tensor([inf, inf])])[1] == 1
