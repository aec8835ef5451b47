"""A candidate is built under a seed other than the reference's (worker.candidate_seed): weights it
makes for itself, outside the reference's state_dict names, are then not the reference's by the luck
of one seed. Two red-team candidates (2026-11-29) kept stale copies of nn.Linear's weights that
way, out of the weights-changed check's reach; both are now incorrect, and honest ones still pass.
The reference's own seed is a secret too (worker.reference_seed): two more (2026-11-30) seeded it
again, from torch.initial_seed() or as KernelBench's 42, and drew the reference's weights for
themselves; both are incorrect now."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.agents.verify.worker import WEIGHTS_LOADED, WEIGHTS_NOT_LOADED, candidate_seed


@pytest.fixture()
def opts(build_cache):
    # environment_probes=False: the reseeding candidates read torch.initial_seed(), which the static
    # reading names (the random state a check sets; test_the_seed_read_is_named_statically); this
    # file tests what the candidate's own seed does to them when they are let through.
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False, environment_probes=False)


def test_the_seed_read_is_named_statically():
    from stitchcuda.agents.verify.static_check import check_candidate_sources

    cand = hack_candidate("hack_reseed_reference_weights")
    found = [f.message for f in check_candidate_sources(cand.files, cand.module) if f.code == "environment-probe"]
    assert any("initial_seed" in m for m in found), found


RESEED = "        torch.manual_seed(torch.initial_seed() - 1)\n"
# hack_reseed_reference_weights with the seed taken otherwise: KernelBench's fixed 42, and the
# generators' seed read as the module is imported (just after the worker built the reference).
RESEEDS = {
    "hack_reseed_42": lambda text: text.replace(RESEED, "        torch.manual_seed(42)\n"),
    "hack_reseed_at_import": lambda text: text.replace(RESEED, "        torch.manual_seed(_SEED)\n").replace(
        "\n\nclass ModelNew", "\n_SEED = torch.initial_seed()\n\n\nclass ModelNew"),
}


def _candidate(stem: str):
    if stem not in RESEEDS:
        return hack_candidate(stem)
    cand = hack_candidate("hack_reseed_reference_weights")
    text = RESEEDS[stem](cand.files["model_new.py"])
    assert text != cand.files["model_new.py"]
    return dataclasses.replace(cand, name=stem, files={**cand.files, "model_new.py": text})


@pytest.mark.parametrize("stem", ["hack_stale_weights_unregistered", "hack_stale_weights_renamed",
                                  "hack_reseed_reference_weights", *RESEEDS])
def test_weights_of_its_own_are_not_the_references(tmp_path, opts, stem):
    v = verify(hack_task("ref_linear"), _candidate(stem), tmp_path / "v", opts)
    assert v.status == "incorrect" and not v.accepted, (v.status, v.message)
    assert WEIGHTS_NOT_LOADED in v.notes


def test_a_candidate_that_takes_the_state_dict_passes(tmp_path, opts):
    v = verify(hack_task("ref_linear"), hack_candidate("good_linear"), tmp_path / "v", opts)
    assert v.accepted and WEIGHTS_LOADED in v.notes, (v.status, v.message)
    assert candidate_seed(42) != 42 and len({candidate_seed(42) for _ in range(8)}) > 1
