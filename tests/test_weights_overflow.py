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
    skipped = [n for n in v.notes if "not judged: the reference's own outputs overflowed" in n]
    assert skipped, v.notes
    assert any(n.startswith("weights-changed-rows set not judged") for n in skipped), skipped
    # The checked sets and the weights-changed sets that did not overflow were judged and passed.
    assert all(c["ok"] for c in v.checks if not c["set"].startswith("weights-changed")), v.checks
    assert any(c["set"] == "weights-changed" and c["ok"] for c in v.checks), v.checks
