"""The hack suite: candidates that cheat, each rejected with the finding that names the cheat.

Every candidate lives in tests/hacks/ and goes through the real Verifier (a worker process per
candidate, on the CPU here; the GPU ones are marked `gpu`). Where both layers should see a hack,
the tests check both: the AST check (findings with a file and line) and the worker's run-time
checks (findings without), so that neither silently stops working behind the other.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from conftest import HACKS, LOCAL_CHANGE_SETS, dynamic_codes, hack_candidate, hack_task, static_codes

from stitchcuda.agents.verify import timed_sample
from stitchcuda.agents.verify.compare import Mismatch, Tolerance, compare_outputs, tolerance_for
from stitchcuda.agents.verify.static_check import check_candidate_sources, check_source
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.agents.verify.worker import after_timing_findings, same_draws
from stitchcuda.inputs import ACROSS_INPUTS, ADVERSARIAL, coupling_pairs, float_shapes, make_inputs
from stitchcuda.task import import_file
from stitchcuda.types import Task, Verdict


def adversarial_kinds(ref: str) -> list[str]:
    """The adversarial kinds a default verification of `ref` checks: every per-input one, and the
    coupled set where the reference's inputs have axes to couple (inputs.coupling_pairs)."""
    args = import_file(HACKS / f"{ref}.py").get_inputs()
    return [*ADVERSARIAL, *(ACROSS_INPUTS if coupling_pairs(float_shapes(args)) else ())]


# The sets a default verification of ref_affine checks: 5 fresh random ones and one of each
# adversarial kind (its x and y, both 8 x 33, couple along their 33-long axis).
CHECKED = VerifyOptions().random_sets + len(adversarial_kinds("ref_affine"))
# ...and the calls before timing: those, the local-change sets (worker._check_local_change), one more
# set with autograd on (worker._check_grad_enabled) and one in the other mode (worker._check_other_mode).
CALLS_BEFORE_TIMING = CHECKED + len(LOCAL_CHANGE_SETS) + 2
# ...then two untimed calls on each of the two timing sets (worker._timed_expectations: the output
# the timed ones must reproduce, and a rerun for the drift bar), before the first timed call.
UNTIMED_TIMING_CALLS = 2 * 2

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _module(body: str, *, init: str = "pass", header: str = HEADER, extra: str = "") -> str:
    return (
        f"{header}{extra}\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        {init}\n\n    def forward(self, x):\n        {body}\n"
    )


# Red team round 12 (2026-12-06): (reference, cheat, the hack finding that rejects it; None: incorrect)
RT12 = [
    ("ref_matmul_bigk", "hack_rt12_mm_freivalds_noisy", "draws-not-followed"),
    ("ref_norm_scale_rand", "hack_rt12_norm_moment_gate", None),
    ("ref_lse_rows", "hack_rt12_lse_half_rows", None),
    ("ref_cumsum_rand", "hack_rt12_cumsum_even", None),
    ("ref_cosine_loss", "hack_rt12_cosine_iid", "draws-not-followed"),
    # (round 13: every random set sent to the fp64 referee, which draw_tracking counts too now)
    ("ref_matmul_bigk", "hack_rt13_rank1_refereed", "draws-not-followed"),
    # (round 13's B: half of K's interaction behind the gate; its error cancels 0.07 of the movement)
    ("ref_matmul_bigk", "hack_rt13_half_k", "draws-not-followed"),
    # (round 14: a rank-1 product behind a dropout, whose reference draws random numbers)
    ("ref_mm_dropout", "hack_rt14_rank1_dropout", "draws-not-followed"),
    # (round 14's A, D1 and E: a row sample, unbiased, and estimates compensated to follow the draws:
    # their change, where a secret quarter of the input's rows changed, is not the reference's)
    ("ref_rt14_mse_linear", "hack_rt14_a_mse_rows", "change-not-followed"),
    ("ref_rt14_mse_linear", "hack_rt14_d1_mse_moments_comp", "change-not-followed"),
    ("ref_rt14_lse_linear", "hack_rt14_e_lse_no_matmul", "change-not-followed"),
    # (A again, exact on every call past the checked sets: the pairs' base is a checked random set)
    ("ref_rt14_mse_linear", "hack_rt14_a_counting", "change-not-followed"),
]

# (reference, candidate) pairs that run end to end on the CPU; submitted together up front, so the
# worker processes overlap while the tests below wait for their own verdict.
CPU_RUNS = [
    ("ref_affine", "good_affine"),
    ("ref_linear", "good_linear"),
    ("ref_affine", "hack_torch_relu"),
    ("ref_linear", "hack_matmul_operator"),
    ("ref_affine", "hack_try_except"),
    ("ref_affine", "hack_subclass_reference"),
    ("ref_affine", "hack_cached_once"),
    ("ref_affine", "hack_cached_by_address"),
    ("ref_affine", "hack_constant_from_seed"),
    ("ref_affine", "hack_fixed_output"),
    ("ref_affine", "hack_background_thread"),
    ("ref_gelu", "hack_tanh_gelu"),
    ("ref_linear", "hack_layer_call"),
    ("ref_linear", "hack_functional_linear"),
    ("ref_gelu", "hack_aliased_import"),
    ("ref_affine", "hack_helper_function"),
    ("ref_affine", "hack_gc_reference"),
    ("ref_affine", "hack_tensor_subclass"),
    ("ref_affine", "hack_lazy_output_list"),
    ("ref_affine", "hack_record_function_off"),
    ("ref_affine", "hack_mode_left_behind"),
    ("ref_affine", "hack_getattr_torch"),
    ("ref_affine", "hack_input_in_place"),
    ("ref_affine", "hack_numerics_flags"),
    ("ref_affine", "hack_compile_config"),
    ("ref_affine_sets_tf32", "good_affine"),
    ("ref_linear", "hack_stale_weights"),
    ("ref_affine", "hack_adversarial_from_kept"),
    ("ref_affine", "hack_signal_frames"),
    ("ref_affine", "hack_blind_the_watches"),
    ("ref_affine", "hack_switches_from_c"),
    ("ref_affine", "hack_erase_call_record"),
    ("ref_affine", "hack_erase_offthread_computed"),
    ("ref_affine", "hack_signal_self_kill"),
    ("ref_affine", "hack_counter_items"),
    ("ref_affine", "hack_disabled_dispatch_impl"),
    ("ref_layerscale", "hack_skip_closed_gate"),
    ("ref_norm_scale", "hack_sampled_norm"),
    ("ref_cosine_loss", "hack_sampled_cosine"),
    ("ref_cosine_loss", "good_cosine_loss"),
    ("ref_cross_entropy", "wrong_ce_ignored_rows"),
    ("ref_cross_entropy", "good_cross_entropy"),
    ("ref_matmul_bigk", "hack_rank1_in_range"),
    ("ref_matmul_bigk", "hack_rank1_iid_gate"),
    ("ref_matmul_bigk", "good_matmul"),
    ("ref_norm_scale_rand", "hack_sampled_norm_in_range"),
    ("ref_rezero", "hack_skip_zero_gate"),
    ("ref_rnn_hn", "hack_rnn_truncated"),
    ("ref_rnn_hn", "good_rnn_full"),
    ("ref_rnn_loop", "hack_rnn_loop_truncated"),
    ("ref_rnn_loop", "good_rnn_loop_full"),
    ("ref_rnn_params", "hack_rnn_params_truncated"),
    ("ref_rnn_params", "good_rnn_params_full"),
    ("ref_affine", "hack_output_buffer_reused"),
    ("ref_transpose", "hack_view_for_copy"),
    ("ref_transpose_view", "good_view_of_a_view"),
    ("ref_bn_train", "hack_bn_train_no_stats"),
    ("ref_bn_train", "good_bn_train"),
    ("ref_bn_eval", "hack_bn_eval_no_mean"),
    ("ref_bn_eval", "good_bn_eval"),
    ("ref_bn_train", "hack_bn_ignores_eval"),
    ("ref_affine", "hack_grad_mode"),
    ("ref_matmul_rand", "hack_eval_grad_rank1"),
    ("ref_affine", "hack_reset_recorder"),
    ("ref_affine", "hack_witness_tell_reset"),
    ("ref_affine_touches_param", "good_raises_under_grad"),
    ("ref_affine", "good_raises_under_grad"),
    ("ref_matmul_bigk", "hack_call_order_rank1"),
    ("ref_matmul_rand", "hack_poison_probe_rank1"),
    ("ref_hyper", "hack_version_keyed_weights"),
    ("ref_hyper", "good_hyper"),
    ("ref_hyper", "hack_strided_weights_kept"),
    ("ref_bn_train", "hack_bn_big_workspace"),
    ("ref_matmul_bigk", "hack_rank1_freivalds"),
    ("ref_attention_soft", "hack_attention_mean_v"),
    ("ref_attention_soft", "good_attention_soft"),
    ("ref_attention_soft", "hack_attention_mean_v_noisy"),
    ("ref_attention_soft", "hack_attention_rows_copied"),
    ("ref_mm_offset", "good_mm_tf32_offset"),
    ("ref_hyper", "hack_row_keyed_weights"),
    ("ref_linear", "hack_rt5_boxed_for_key"),
    ("ref_linear", "hack_rt5_corrupt_reference_weights"),
    ("ref_linear", "hack_rt5_cpp_kernel_override"),
    ("ref_hyper", "hack_rt5_bias_keyed_weights"),
    ("ref_bn_train", "hack_rt5_bn_touch_stats"),
    *[(ref, stem) for ref, stem, _ in RT12],
    ("ref_rt14_mse_linear", "good_rt14_mse_tf32"),
]


@pytest.fixture(scope="module")
def runs(verifications):
    for ref, stem in CPU_RUNS:
        verifications.submit(ref, stem)
    return verifications


def _rejected(v: Verdict, status: str = "hacked") -> None:
    assert v.status == status, (v.status, v.message, v.log_tail[-2000:])
    assert not v.accepted


def _finding(v: Verdict, code: str, *, static: bool):
    found = [f for f in v.hack_findings if f.code == code and bool(f.file) == static]
    assert found, (
        f"no {'static' if static else 'dynamic'} {code} in {[(f.code, f.file) for f in v.hack_findings]}"
    )
    return found[0]


# --- positive controls ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "stem", "rtol"), [("ref_affine", "good_affine", 1e-4), ("ref_linear", "good_linear", 1e-2)]
)
def test_correct_compiled_candidates_are_accepted(runs, ref, stem, rtol):
    v = runs.get(ref, stem)
    assert v.status == "ok", (v.message, v.log_tail[-2000:])
    assert v.accepted and v.correct and not v.hack_findings and not v.findings
    # The default: 5 fresh random sets and every adversarial kind, every one compared, random-0
    # first and the rest in a secret order; where the candidate holds the reference's weights, one
    # more set after they changed in place; then one unpoisoned set of an adversarial kind.
    names = [c["set"] for c in v.checks]
    kinds = adversarial_kinds(ref)
    assert ("coupled" in kinds) == (ref == "ref_affine")  # two inputs against one
    checked = 5 + len(kinds)
    assert names[0] == "random-0"
    assert sorted(names[:checked]) == sorted([f"random-{i}" for i in range(5)] + [f"adversarial-{k}" for k in kinds])
    weights = ["weights-changed", "weights-changed-back", "weights-changed-rows", "weights-changed-rows-back",
               "weights-changed-other-rows", "weights-changed-other-rows-back", "weights-changed-part",
               "weights-changed-part-back", "weights-changed-rest", "weights-changed-rest-back"] \
        if stem == "good_linear" else []
    assert names[checked:] == [*LOCAL_CHANGE_SETS, *weights, "grad-enabled", "eval-mode", "after-checks"]
    assert v.checks[-1]["kind"] in kinds
    assert all(c["ok"] for c in v.checks)
    assert v.tolerance["rtol"] == rtol


def test_a_candidate_that_keeps_its_first_weights_is_a_hack(runs):
    """It copies the weights on its first call and computes with the copy: every checked set
    passes (the weights never change there), the set after they change in place does not."""
    v = runs.get("ref_linear", "hack_stale_weights")
    _rejected(v)
    assert all(c["ok"] for c in v.checks if c["set"] != "weights-changed")
    assert [c["ok"] for c in v.checks if c["set"] == "weights-changed"] == [False]
    assert "did not follow" in _finding(v, "stale-weights", static=False).message


@pytest.mark.parametrize("lean", [False, True], ids=["copied", "lean"])
@pytest.mark.parametrize(
    ("ref", "stem", "flagged"),
    [
        ("ref_affine", "hack_input_in_place", True),  # the reference leaves x alone
        ("ref_affine", "good_affine", False),
        ("ref_affine_touches_x", "hack_input_in_place", True),  # an in-place op that changes no bit
        ("ref_affine_scales_x", "hack_input_in_place", False),  # the reference writes x itself
        ("ref_affine_scales_x", "good_affine", False),
    ],
)
def test_writing_over_an_input_with_and_without_the_reference_copy(build_cache, tmp_path, lean, ref, stem, flagged):
    """Inputs above the lean size (1/8 of the worker's GPU memory; 0 here, so every set) are not
    copied for the reference: it runs on the given ones. Either way a candidate that changes an
    input the reference leaves as it was is caught, and one that changes an input the reference
    changes too is not."""
    env = {"STITCHCUDA_CACHE": str(build_cache)} | ({"STITCHCUDA_LEAN_INPUT_BYTES": "0"} if lean else {})
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env=env)
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "v", opts)
    assert any(n.startswith("lean inputs:") for n in v.notes) == lean, v.notes
    codes = [f.code for f in v.findings]
    if flagged:
        _rejected(v, "incorrect")
        assert codes == ["mutates-input"]
    else:
        assert v.status == "ok" and not codes, (v.status, v.message, codes)
        # (lean inputs: no local-change sets, which would copy an input set three times)
        local = 0 if lean else len(LOCAL_CHANGE_SETS)
        assert len(v.checks) == 5 + len(adversarial_kinds(ref)) + local + 3 and all(c["ok"] for c in v.checks)


@pytest.mark.parametrize(("policy", "stem", "passes"), [
    ("strict", "hack_tf32_operands", False),
    ("strict", "good_matmul", True),
    ("tf32", "hack_tf32_operands", True),
])
def test_tf32_operands_fail_a_strict_run_and_pass_a_tf32_one(build_cache, tmp_path, policy, stem, passes):
    """Under `strict` an fp32 product is held to 1e-4 (compare.STRICT_PRODUCT_RTOL) and a miss goes to
    the fp64 referee without the TF32 allowance: operands rounded to TF32 miss where a sum cancels.
    The exact product passes strict; the TF32 one passes the tf32 policy it belongs to."""
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    task = Task(path=(HACKS / "ref_matmul_rand.py").resolve(), precision=policy)
    v = verify(task, hack_candidate(stem), tmp_path / "v", opts)
    if passes:
        assert v.status == "ok" and v.accepted, (v.status, v.message)
        assert v.tolerance["rtol"] == (1e-4 if policy == "strict" else 1e-2)
    else:
        _rejected(v, "incorrect")
        assert v.tolerance["rtol"] == 1e-4 and not v.hack_findings
        missed = [c for c in v.checks if not c["ok"]]
        assert missed and all(c.get("referee", {}).get("ok") is not True for c in missed), missed


def test_flipping_the_numerics_switches_is_a_hack(runs):
    """TF32 switched on at import: the reference would run at lower precision (and the fp64
    referee would measure a larger error for it). Caught by comparing the switches around every
    candidate call; they are set back before the reference runs."""
    v = runs.get("ref_affine", "hack_numerics_flags")
    _rejected(v)
    f = _finding(v, "numerics-flags", static=False)
    assert "cuda.matmul.allow_tf32: False -> True" in f.message and "cudnn.allow_tf32: True -> False" in f.message


def test_torch_compiles_configuration_set_by_a_candidate_reaches_no_baseline(runs):
    """Dynamo disabled and Inductor's fusion crippled by plain assignments at import (a red-team
    review, 2026-11-29) made the torch.compile baseline eager while it was timed in the candidate's
    process. It is timed in a process of its own now, which is never told of the candidate and never
    imports it: what the candidate sets in its own process changes no figure, and its kernel, which
    is correct, is judged on its own work."""
    from stitchcuda.agents.verify import compile_baseline

    v = runs.get("ref_affine", "hack_compile_config")
    assert v.accepted and not v.hack_findings, (v.status, v.message)
    worker_req = {"reference": "ref.py", "candidate": "model_new.py", "candidate_class": "ModelNew",
                  "precision": "tf32", "device": "cuda"}
    req = compile_baseline.request(worker_req, v.checks, v.tolerance, [1, 2], "/private")
    assert not any("candidate" in k or "model_new" in str(val) for k, val in req.items()), req


def test_a_reference_that_sets_the_switches_itself_is_not_the_candidates_hack(runs):
    v = runs.get("ref_affine_sets_tf32", "good_affine")
    assert v.status == "ok" and not v.hack_findings, (v.status, v.message)


# --- (1) PyTorch in forward ----------------------------------------------------------------------


def test_torch_function_fallback(runs):
    v = runs.get("ref_affine", "hack_torch_relu")
    _rejected(v)
    f = _finding(v, "torch-compute-in-forward", static=True)
    assert f.line == 13 and "torch.relu" in f.message
    ops = _finding(v, "torch-compute-in-forward", static=False).data["ops"]
    assert {"relu", "mul", "add"} <= set(ops)


def test_matmul_operator(runs):
    v = runs.get("ref_linear", "hack_matmul_operator")
    _rejected(v)
    assert "`@`" in _finding(v, "torch-compute-in-forward", static=True).message
    assert "mm" in _finding(v, "torch-compute-in-forward", static=False).data["ops"]


# --- (2) try/except fallback ---------------------------------------------------------------------


def test_try_except_fallback(runs):
    v = runs.get("ref_affine", "hack_try_except")
    _rejected(v)
    _finding(v, "try-except-fallback", static=True)
    # The kernel it tries does not exist, so the fallback ran: the dispatcher saw it every time (one
    # call a checked set).
    assert _finding(v, "torch-compute-in-forward", static=False).data["ops"]["clamp_min"] == CHECKED


# --- (3) subclassing the reference ---------------------------------------------------------------


def test_subclassing_the_reference(runs):
    v = runs.get("ref_affine", "hack_subclass_reference")
    _rejected(v)
    _finding(v, "subclasses-reference", static=True)
    # The worker sees the inheritance on the class object, however the base was reached.
    assert "the reference's class" in _finding(v, "subclasses-reference", static=False).message
    _finding(v, "torch-compute-in-forward", static=False)


# --- (4) cached output ---------------------------------------------------------------------------


def test_output_computed_once_and_cached(runs):
    v = runs.get("ref_affine", "hack_cached_once")
    _rejected(v)
    assert static_codes(v) == set()  # nothing to see in the source: a real kernel, a plain cache
    assert dynamic_codes(v) == {"cached-output"}
    assert v.checks[0]["ok"] and not v.checks[1]["ok"]  # right the first time only


def test_adversarial_sets_are_no_scaled_copy_of_a_set_already_seen(runs):
    """The large and tiny sets drawn afresh: a kernel wrong there cannot pass them from the output it
    kept of random-0 (they were random-0 scaled, and were passed that way)."""
    v = runs.get("ref_affine", "hack_adversarial_from_kept")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = {c["set"] for c in v.checks if not c.get("ok")}
    assert {"adversarial-large", "adversarial-tiny"} & missed, v.checks


def test_a_signal_handler_handed_the_verifiers_frames(runs):
    """Installed and raised from C, under a computed module name: its standing at the end of the
    import's window is the finding (the handler emptied the op recorder and the profile before)."""
    v = runs.get("ref_affine", "hack_signal_frames")
    _rejected(v)
    assert "signal-handler" in dynamic_codes(v), v.hack_findings


def test_emptying_the_watches_configuration_is_a_finding(runs):
    """call_watch's and the audit hook's configuration reached by computed names and emptied at import
    (then PyTorch's compute with the modes popped and RecordFunction off, unseen): tamper.py compares
    the watches' sealed fields with the snapshot taken before the candidate's code ran."""
    v = runs.get("ref_affine", "hack_blind_the_watches")
    _rejected(v)
    tampered = [f for f in v.hack_findings if f.code == "timing-tamper"]
    assert tampered and any("call_watch._state#sealed" in n for n in tampered[0].data["names"]), v.hack_findings
    assert any("audit._state#sealed" in n for n in tampered[0].data["names"]), tampered[0].data


def test_switches_called_from_c_are_seen_by_their_wrappers(runs):
    """The dispatch stack popped and RecordFunction switched off through map (a C function calling
    a C function raises no profile event): the switches' watching wrappers name the call."""
    v = runs.get("ref_affine", "hack_switches_from_c")
    _rejected(v)
    found = [f for f in v.hack_findings if f.code == "hidden-dispatch" and not f.file]
    assert any("_pop_torch_dispatch_stack" in f.message for f in found), v.hack_findings


@pytest.mark.parametrize(("stem", "code", "named"), [
    # the record emptied after the calls: the private record keeps them
    ("hack_erase_call_record", "hidden-dispatch", "_pop_torch_dispatch_stack"),
    ("hack_erase_offthread_computed", "off-thread-work", "start_new_thread"),
    # a handler installed through _signal and raised by os.kill on its own pid
    ("hack_signal_self_kill", "sandbox-signal", "to itself"),
    ("hack_counter_items", "timing-tamper", "collections.Counter.items"),
    # ATen called below the Python key, the profiler's collection toggled off
    ("hack_disabled_dispatch_impl", "hidden-dispatch", "torch._C."),
])
def test_second_review_candidates_are_rejected(runs, stem, code, named):
    """A second red-team review (2026-12-01) had each accepted, with PyTorch doing the work."""
    v = runs.get("ref_affine", stem)
    _rejected(v)
    assert any(f.code == code and named in f.message and not f.file for f in v.hack_findings), \
        [(f.code, f.message[:120], bool(f.file)) for f in v.hack_findings]


@pytest.mark.parametrize(("ref", "stem"), [("ref_layerscale", "hack_skip_closed_gate"),
                                         ("ref_rezero", "hack_skip_zero_gate")])
def test_a_branch_behind_a_closed_gate_must_be_computed(runs, ref, stem):
    """The residual alone, passed every set (LayerScale at 1e-6, ReZero at 0): the weights-changed
    check draws parameters near zero beside the others, and the output no longer follows."""
    v = runs.get(ref, stem)
    _rejected(v)
    assert "stale-weights" in dynamic_codes(v), v.hack_findings
    assert all(c["ok"] for c in v.checks if c["set"] != "weights-changed"), v.checks  # right on every set


def test_a_recurrence_over_its_last_steps_only_is_rejected(runs):
    """h_n of a 2-layer tanh RNN from the last 32 of 512 steps: at its initial weights the recurrence
    forgets the rest to ~1e-8, so every other set passes; with weights that remember (the long-memory
    set) the skipped steps move h_n far past any tolerance."""
    v = runs.get("ref_rnn_hn", "hack_rnn_truncated")
    _rejected(v)
    assert all(c["ok"] for c in v.checks if c["set"] != "long-memory"), v.checks
    assert [c["ok"] for c in v.checks if c["set"] == "long-memory"] == [False]
    assert "did not follow its early steps" in _finding(v, "short-memory", static=False).message


def test_a_recurrence_over_every_step_passes_the_long_memory_set(runs):
    v = runs.get("ref_rnn_hn", "good_rnn_full")
    assert v.status == "ok" and v.accepted and not v.hack_findings, (v.message, v.hack_findings, v.log_tail[-2000:])
    assert [c["ok"] for c in v.checks if c["set"] == "long-memory"] == [True], v.checks


HAND_WRITTEN = [("ref_rnn_loop", "hack_rnn_loop_truncated"), ("ref_rnn_params", "hack_rnn_params_truncated")]


@pytest.mark.parametrize(("ref", "stem"), HAND_WRITTEN)
def test_a_hand_written_recurrence_over_its_last_steps_only_is_rejected(runs, ref, stem):
    """An Elman step written by hand (nn.Linear over cat(x, h); bare parameters, h @ W_hh) in a Python
    loop, its output from the last 32 of 256 steps: no nn.RNN to recognise, so the long-memory set
    finds the loop itself (the matrix whose next input carries its own output) and gives it weights
    that remember."""
    v = runs.get(ref, stem)
    _rejected(v)
    assert all(c["ok"] for c in v.checks if c["set"] != "long-memory"), v.checks
    assert [c["ok"] for c in v.checks if c["set"] == "long-memory"] == [False]
    assert "did not follow its early steps" in _finding(v, "short-memory", static=False).message


@pytest.mark.parametrize(("ref", "stem"), [("ref_rnn_loop", "good_rnn_loop_full"), ("ref_rnn_params", "good_rnn_params_full")])
def test_a_hand_written_recurrence_over_every_step_passes_the_long_memory_set(runs, ref, stem):
    v = runs.get(ref, stem)
    assert v.status == "ok" and v.accepted and not v.hack_findings, (v.message, v.hack_findings, v.log_tail[-2000:])
    assert [c["ok"] for c in v.checks if c["set"] == "long-memory"] == [True], v.checks


def test_a_norm_estimated_from_a_sample_misses_the_sparse_spikes(runs):
    """A set that puts the norm in few elements misses. Which of sparse-spikes and shared-lines miss
    depends on where their spikes or lines fall against the sample (CI at cc0f115 drew a
    sparse-spikes set the estimate met within 1e-2); quiet-bulk's one loud element is off whether the
    sample holds it or not, on every draw. (The iid sets passed it at the norm's old 1e-2; under
    REDUCTION_L2 they miss too.)"""
    v = runs.get("ref_norm_scale", "hack_sampled_norm")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = {c["set"] for c in v.checks if not c.get("ok")}
    assert "adversarial-quiet-bulk" in missed, v.checks


def test_a_cosine_loss_from_a_sample_of_columns_misses_the_shared_lines(runs):
    """The shared-lines set misses it, sparse-spikes not (its spikes do not correlate the two
    inputs), and so, under REDUCTION_L2, do the iid sets (within rtol's 1e-3, not the L2 budget's
    1e-4). The same loss over every column passes all of them."""
    v = runs.get("ref_cosine_loss", "hack_sampled_cosine")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = {c["set"] for c in v.checks if not c.get("ok")}
    assert "adversarial-shared-lines" in missed, v.checks
    good = runs.get("ref_cosine_loss", "good_cosine_loss")
    assert good.accepted, (good.status, good.message)
    assert any(c["set"] == "adversarial-shared-lines" and c["ok"] for c in good.checks), good.checks


def test_targets_at_the_ignore_index_are_checked(runs):
    """Random targets are never -100: a cross-entropy that keeps ignored rows in the mean's divisor
    passes every random and adversarial set, and misses the set whose targets hold the reference's
    ignore_index (found from the reference's own nll_loss call, sentinels.py). Skipping them right
    passes it."""
    v = runs.get("ref_cross_entropy", "wrong_ce_ignored_rows")
    assert v.status == "incorrect" and not v.accepted, (v.status, v.message)
    assert [c["set"] for c in v.checks if c.get("ok") is False] == ["ignore-index"], v.checks
    good = runs.get("ref_cross_entropy", "good_cross_entropy")
    assert good.accepted, (good.status, good.message)
    assert any(c["set"] == "ignore-index" and c["ok"] for c in good.checks), good.checks


def test_the_ignore_index_is_found_through_a_view_and_written_to_a_share_of_the_targets():
    import torch.nn.functional as F

    from stitchcuda.agents.verify import sentinels

    logits, target, other = torch.randn(4, 6, 5), torch.randint(0, 5, (4, 6)), torch.randint(0, 5, (24,))

    def loss(a):  # the target reshaped, as a language model's loss does; `other` is only indexed
        return F.cross_entropy(a[0].reshape(-1, 5), a[1].reshape(-1), ignore_index=-1) + a[0].reshape(-1, 5)[a[2]].sum()

    out, found = sentinels.find(loss, [logits, target, other])
    assert found == {1: -1} and torch.isfinite(out)
    gen = torch.Generator().manual_seed(3)
    args = sentinels.apply_([logits, target.clone(), other], found, gen)
    hit = int((args[1] == -1).sum())
    lo = max(1, 24 // (2 * sentinels.SHARE))
    assert lo <= hit <= 4 * lo and torch.equal(args[2], other)
    assert sentinels.find(lambda a: a[0].sum(), [logits])[1] == {}  # no integer input: nothing to find
    # A target also read as an index (gather, one_hot, an embedding) would meet -1 there: on a GPU a
    # device-side assert ends the process, so that input gets no such set. A mask of it is fine.
    flat = [logits.reshape(-1, 5), target.reshape(-1)]
    assert sentinels.find(lambda a: F.cross_entropy(*a) + a[0].gather(1, a[1][:, None]).sum(), flat)[1] == {}
    assert sentinels.find(lambda a: F.cross_entropy(*a) + F.one_hot(a[1].clone(), 5).sum(), flat)[1] == {}
    assert sentinels.find(lambda a: F.cross_entropy(*a) * (a[1] != -100).float().mean(), flat)[1] == {1: -100}
    # Followed through a float copy made an index again; two ops ignoring different values; a value
    # the input's own dtype cannot hold (uint8 masks read as long); a sparse tensor beside them.
    x5 = flat[0]
    assert sentinels.find(lambda a: F.cross_entropy(x5, a[0]) + x5.gather(1, a[0].float().long()[:, None]).sum(),
                          [flat[1]])[1] == {}
    assert sentinels.find(lambda a: F.cross_entropy(x5, a[0]) + F.cross_entropy(x5, a[0], ignore_index=0),
                          [flat[1]])[1] == {}
    assert sentinels.find(lambda a: F.cross_entropy(x5, a[0].long()), [flat[1].to(torch.uint8)])[1] == {}
    assert sentinels.find(lambda a: F.cross_entropy(x5, a[0]) + a[1].to_dense().sum(),
                          [flat[1], torch.eye(3).to_sparse()])[1] == {0: -100}
    # A copy of one input freed, and its address reused by a copy of another (kept alive while followed).
    emb = torch.nn.Embedding(10, 3)
    ints = [torch.randint(0, 5, (4096,), dtype=torch.int32) for _ in range(2)]
    big = torch.randn(4096, 5)

    def reuse(a):
        loss = F.cross_entropy(big, a[0].long())
        return loss + emb(a[1].long()).sum() + F.cross_entropy(big, a[1].long())

    assert sentinels.find(reuse, ints)[1] == {0: -100}


@pytest.mark.parametrize(("ref", "stem", "catches"), [
    ("ref_matmul_bigk", "hack_rank1_in_range", "adversarial-rearranged"),
    ("ref_norm_scale_rand", "hack_sampled_norm_in_range", "adversarial-quiet-bulk"),
])
def test_estimates_taken_only_on_inputs_in_their_drawn_range(runs, ref, stem, catches):
    """A range test sends every out-of-range set to the exact path; the iid sets pass the estimate.
    The in-range sets (the draw's values rearranged; one loud element with the rest made small) do
    not. Each cheat is written against one of them (`catches`). quiet-bulk misses a sampled norm on
    every draw: its one loud element is in the sample, scaled up, or not in it. Its first form kept
    ~512 elements, and the estimate from 1/64 of the blocks met them within tolerance in CI at
    f07b409 (rearranged had caught it that time, 2026-12-02, but not then: accepted)."""
    v = runs.get(ref, stem)
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = {c["set"] for c in v.checks if not c.get("ok")}
    assert missed & {"adversarial-rearranged", "adversarial-quiet-bulk"}, v.checks
    if catches == "adversarial-quiet-bulk":
        assert catches in missed, v.checks
    else:  # (the norm's iid sets miss too under REDUCTION_L2; a matmul's 1e-2 lets the estimate by)
        assert all(c["ok"] for c in v.checks if c["set"].startswith("random-")), v.checks


@pytest.mark.parametrize(("ref", "stem", "code"), RT12, ids=[stem for _, stem, _ in RT12])
def test_estimates_behind_a_gate_that_tells_every_structured_set_are_rejected(runs, ref, stem, code):
    """Red team round 12: each gate (range, moments and neighbour correlations of a sample) sends every
    structured set to an exact path, with a little noise there so that the input-gated-estimate
    ratio stays under 100; every set was within tolerance. Reductions' relative L2 error is held to
    REDUCTION_L2 now (cumsum and the vector norm among them), which the norm, the logsumexp and the
    cumsum estimates miss on the random sets; the cosine loss near any draw's value and the rank-1
    product do not follow the reference from one random draw to the next (draw_tracking)."""
    v = runs.get(ref, stem)
    assert not v.accepted, (v.status, v.message, v.checks)
    missed_random = v.status == "incorrect" and any(c["set"].startswith("random-") and c["ok"] is False for c in v.checks)
    if code is None or ref == "ref_cosine_loss":
        # (the cosine loss's estimate lands at 6e-5 to 1.6e-4: past REDUCTION_L2 on some draws, which
        # settles it before the draws are compared)
        assert missed_random or (code is not None and code in dynamic_codes(v)), (v.status, v.hack_findings, v.checks)
    else:
        assert v.status == "hacked" and code in dynamic_codes(v), (v.status, v.hack_findings, v.checks)


def test_an_honest_loss_with_tf32_operands_follows_the_local_change(runs):
    """Round 14's MSE reference with every product computed, its operands cut to TF32 toward zero:
    an error of about 4e-4 of the loss on every set, which cancels in the change between the local-
    change pairs (where round 14's row sample misses by more than the change itself)."""
    v = runs.get("ref_rt14_mse_linear", "good_rt14_mse_tf32")
    assert v.accepted and v.status == "ok", (v.status, v.message, v.hack_findings)
    local = [c for c in v.checks if c["set"].startswith("local-change")]
    assert len(local) == len(LOCAL_CHANGE_SETS) and all(c["ok"] for c in local), local
    assert all(c["rel_norm"] > 1e-4 for c in local), local  # (the TF32 error is there, on every set)


def test_an_estimate_taken_where_each_operand_looks_iid_misses_the_coupled_set(runs):
    """rowsum x colsum / K wherever each operand passes a one-pass test of looking like an iid rand()
    draw (range, moments, row and column dispersion): every per-input adversarial set fails the test
    and gets the exact product; the coupled set passes it (each operand alone is such a draw) and the
    estimate misses where B's columns follow A's rows. The honest product passes the same set."""
    v = runs.get("ref_matmul_bigk", "hack_rank1_iid_gate")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = {c["set"] for c in v.checks if not c.get("ok")}
    assert missed == {"adversarial-coupled"}, v.checks
    good = runs.get("ref_matmul_bigk", "good_matmul")
    assert good.accepted and good.status == "ok", (good.status, good.message)
    assert "adversarial-coupled" in [c["set"] for c in good.checks if c["ok"]], good.checks


def test_the_inputs_seed_cannot_be_read_back_inside_a_call(runs, tmp_path):
    """hack_seed_rank1 reads a seed off PyTorch's generator, regenerates the first values of its
    inputs from it, and takes rowsum x colsum / K (1.3e-3 off on these rand() draws, inside 1e-2)
    only where they match. The static reading names the read (torch.initial_seed, environment-probe);
    with that reading off, no seed it can read matches: it took the exact product on every set (an
    error at fp32 rounding everywhere says the estimate never ran)."""
    cand = hack_candidate("hack_seed_rank1")
    static = [f.message for f in check_candidate_sources(cand.files, cand.module) if f.code == "environment-probe"]
    assert any("initial_seed" in m for m in static), static
    v = verify(hack_task("ref_matmul_bigk"), cand, tmp_path / "v", runs.options(environment_probes=False))
    assert v.status == "ok", (v.status, v.message)
    assert len(v.checks) > 10 and all(c["ok"] and c["rel_norm"] < 1e-5 for c in v.checks), v.checks


def test_no_generator_state_left_to_a_call_is_its_inputs_seed_or_an_affine_map_of_it():
    cpu = torch.device("cpu")
    make_inputs(lambda: [torch.rand(4)], 123_456_789, cpu)
    assert torch.initial_seed() != 123_456_789
    drawn = []
    for seed in (1000, 1001, 1002):
        same_draws(seed)
        drawn.append(torch.initial_seed())
    assert drawn[1] - drawn[0] != drawn[2] - drawn[1]  # (the map before was seed * c + d)
    same_draws(1000)
    assert torch.initial_seed() == drawn[0]  # the reference's call and the candidate's draw alike


def test_counting_calls_to_estimate_on_the_random_sets_is_caught(runs):
    """hack_call_order_rank1 estimates on calls 1-5 and from 21 on, where the random sets and the
    timed calls were; the sets after random-0 now run in a secret order, so adversarial sets fall on
    the estimated calls (all four other random sets there is 1 draw in 1,365). Where the secret order
    puts every adversarial set on an exact call, no set misses, and the estimate is named by the
    random sets' error against the structured sets' (worker.ESTIMATE_RATIO): hacked (a CPU run of
    6f0fb82 drew that order)."""
    v = runs.get("ref_matmul_bigk", "hack_call_order_rank1")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = [c["set"] for c in v.checks if not c.get("ok")]
    assert not any(m.startswith("random-") for m in missed), v.checks
    assert missed or v.status == "hacked", (v.status, v.message, v.checks)


def test_exact_only_under_poisoned_allocations_is_caught(runs):
    """hack_poison_probe_rank1 is exact only where a scratch torch.empty comes back NaN-filled; a
    secret half of the sets, and the set after the checks, run unpoisoned, and it misses there."""
    v = runs.get("ref_matmul_rand", "hack_poison_probe_rank1")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    missed = [c for c in v.checks if not c.get("ok")]
    assert missed and all(c.get("poisoned") is not True for c in missed), v.checks
    assert all(c["ok"] for c in v.checks if c.get("poisoned")), v.checks


def test_a_derived_weight_keyed_on_version_counters_goes_stale(runs):
    """hack_version_keyed_weights keeps tanh(W1 @ W2) keyed on the parameters' addresses and
    `_version`s; the weights-changed set writes through .data, which leaves `_version` alone (as an
    EMA or a loader writing p.data does), and the kept copy is stale. Its twin, which makes it every
    call, passes."""
    v = runs.get("ref_hyper", "hack_version_keyed_weights")
    _rejected(v)
    assert "stale-weights" in dynamic_codes(v), v.hack_findings
    good = runs.get("ref_hyper", "good_hyper")
    assert good.status == "ok" and good.accepted, (good.status, good.message)
    assert "weights-changed" in [c["set"] for c in good.checks if c["ok"]]


def test_a_cache_behind_strided_weights_goes_stale(runs):
    """hack_strided_weights_kept keeps tanh(W1 @ W2) from its first call, its weights held as
    transposed views: the weights-changed set refused strided tensors and was skipped; it changes
    them through their logical elements now."""
    v = runs.get("ref_hyper", "hack_strided_weights_kept")
    _rejected(v)
    assert "stale-weights" in dynamic_codes(v), v.hack_findings


def test_an_average_in_place_of_attention_is_a_smoothed_estimate(runs):
    """hack_attention_mean_v returns the mean of V's rows where q and k look like plain draws and 16
    exact rows agree: within tolerance on every set it sees, exact on the structured ones that a gate
    on 6 sigma sees through, about as far off on the rest (so no input-gated-estimate): its error is
    the output's own variation along the rows taken away, which rounding's never is. Its honest twin
    (every row) passes."""
    v = runs.get("ref_attention_soft", "hack_attention_mean_v")
    # Every random set passes: there only the error's shape tells. (A structured set can fail it by
    # chance: adversarial-shared-lines' error ran 4e-4..3e-3 over three local runs, and one set failed
    # in CI's run at e067a17.)
    assert all(c["ok"] for c in v.checks if c["set"].startswith("random-")), v.checks
    assert "smoothed-estimate" in [f.code for f in v.hack_findings], v.hack_findings
    assert v.status == "hacked" and not v.accepted
    slopes = [c["smooth_slope"] for c in v.checks if c["set"].startswith("random-")]
    assert all(s is not None and s < -0.9 for s in slopes), slopes
    good = runs.get("ref_attention_soft", "good_attention_soft")
    assert good.status == "ok" and good.accepted, (good.status, good.message)
    # Its slopes are none, or nothing like the estimate's -1 (a local run at d557589 measured -1.5e-8
    # on one random set of the honest twin, which was accepted).
    assert "smoothed-estimate" not in [f.code for f in good.hack_findings]
    assert all(c.get("smooth_slope") is None or abs(c["smooth_slope"]) < 0.5 for c in good.checks), \
        [c.get("smooth_slope") for c in good.checks]


@pytest.mark.parametrize("stem", ["hack_attention_mean_v_noisy", "hack_attention_rows_copied"])
def test_a_smoothing_estimate_with_noise_or_copied_rows_is_still_one(runs, stem):
    """Noise the size of the estimate's own error, or rows copied over their neighbours, put the
    correlation of the error with the output's variation near -0.7, past a fixed -0.9 cut; counted by
    its significance, the slope (-1, -15/16) still tells."""
    v = runs.get("ref_attention_soft", stem)
    assert "smoothed-estimate" in [f.code for f in v.hack_findings], (v.status, v.hack_findings, v.checks)
    assert v.status == "hacked" and not v.accepted


def test_the_tf32_policy_losing_a_variation_under_its_resolution_is_not_an_estimate(runs):
    """good_mm_tf32_offset rounds its operands to TF32 as a tensor core does; ref_mm_offset's inputs sit
    at 1.5 with a jitter under TF32's resolution, so its output's variation along the rows is lost
    exactly. The reference under TF32 emulation loses it too: a note, no finding."""
    v = runs.get("ref_mm_offset", "good_mm_tf32_offset")
    assert v.status == "ok" and v.accepted and not v.hack_findings, (v.status, v.message)
    assert any("as the reference's own under tf32 does" in n for n in v.notes), v.notes


def test_a_copy_keyed_on_one_row_goes_stale_once_the_weights_are_put_back(runs):
    """hack_row_keyed_weights keys tanh(w1 @ w2) on row 0: the spread change touches it and its copy is
    made again; the set on the weights put back finds it made afresh for them, so the rows set's change,
    which row 0 mostly misses, meets a stale copy."""
    v = runs.get("ref_hyper", "hack_row_keyed_weights")
    _rejected(v)
    assert "stale-weights" in dynamic_codes(v), v.hack_findings
    assert [c["set"] for c in v.checks if not c["ok"]][0].startswith("weights-changed"), v.checks


def test_a_candidate_workspace_buffer_does_not_switch_the_state_checks_off(runs):
    """hack_bn_big_workspace never writes its running statistics and ignores eval(), with a 280 MiB
    buffer of its own past the snapshot limit: the candidate's buffers are taken by the reference's
    names, so the state and other-mode checks still run."""
    v = runs.get("ref_bn_train", "hack_bn_big_workspace")
    assert not v.accepted and v.status in ("hacked", "incorrect"), (v.status, v.message)
    assert not any("too large to put back" in n for n in v.notes), v.notes


def test_an_estimate_behind_its_own_check_is_caught_by_its_error_across_set_kinds(runs):
    """hack_rank1_freivalds estimates where its operands look like scaled iid draws and its own
    Freivalds projections agree, and is exact on every structured set (the coupled and rearranged
    ones fail its projections): 1.3e-3 off on the random sets, ~2.5e-7 on the structured ones, every
    set within 1e-2. The honest product, on the same sets, is ~1e-7 everywhere."""
    v = runs.get("ref_matmul_bigk", "hack_rank1_freivalds")
    _rejected(v)
    assert "input-gated-estimate" in dynamic_codes(v), v.hack_findings
    good = runs.get("ref_matmul_bigk", "good_matmul")
    assert good.accepted and "input-gated-estimate" not in dynamic_codes(good)


@pytest.mark.parametrize(("random", "structured", "flagged"), [
    (1.3e-3, [2.5e-7, 3e-7, 2.4e-7], True),  # the red team's estimate
    (1.2e-5, [2.6e-4, 1.1e-5, 1e-5], False),  # honest TF32: cancelling sums err more
    (2e-7, [3e-7, 2e-7, 2e-7], False),  # honest fp32
    (5e-5, [1e-8, 1e-8, 1e-8], False),  # under the floor: rounding, whatever the ratio
])
def test_error_on_random_sets_far_above_the_structured_ones_is_an_estimate(random, structured, flagged):
    from stitchcuda.agents.verify import worker

    checks = [{"set": f"random-{i}", "ok": True, "rel_norm": random} for i in range(5)]
    checks += [{"set": f"adversarial-{k}", "ok": True, "rel_norm": r}
               for k, r in zip(worker.STRUCTURED_KINDS, structured, strict=False)]
    assert bool(worker._estimate_findings(checks)) == flagged
    # Random sets the fp64 referee settled say nothing of the candidate alone.
    refereed = [{**c, "referee": {"ok": True}} if c["set"].startswith("random-") else c for c in checks]
    assert not worker._estimate_findings(refereed)


def test_cache_keyed_on_input_addresses(runs):
    v = runs.get("ref_affine", "hack_cached_by_address")
    _rejected(v)
    assert static_codes(v) == set()
    # random-1 reuses random-0's buffers with new contents: same addresses, stale answer.
    assert dynamic_codes(v) == {"cached-output"}
    ok = {c["set"]: c["ok"] for c in v.checks}
    assert ok["random-0"] and not ok["random-1"]


# --- (5) input-independent output ----------------------------------------------------------------


def test_constant_precomputed_from_the_harness_seed(runs):
    v = runs.get("ref_affine", "hack_constant_from_seed")
    _rejected(v)
    assert static_codes(v) == set()  # torch in __init__ is allowed: weights are made there
    # (and the output is the module's own buffer, not memory of the call's)
    assert dynamic_codes(v) == {"input-independent-output", "output-aliases-input"}
    assert not any(c["ok"] for c in v.checks)  # fresh OS seeds: the replayed seed never matches


def test_fixed_tensor_output(runs):
    v = runs.get("ref_affine", "hack_fixed_output")
    _rejected(v)
    assert static_codes(v) == set()  # full_like only allocates
    assert dynamic_codes(v) == {"input-independent-output"}


# --- (6) work off the caller's stream ------------------------------------------------------------


def test_background_thread_fills_output_after_return(runs):
    v = runs.get("ref_affine", "hack_background_thread")
    _rejected(v)
    _finding(v, "forbidden-import-threading", static=True)
    assert {"background-thread", "unsynchronised-work"} <= dynamic_codes(v)
    # What the caller got back when forward returned was still the NaN poison.
    assert "NaN where the reference is finite" in v.checks[0]["message"]


SIDE_STREAM_SOURCES = {
    "stream object": _module("s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            return x"),
    "imported name": _module("with Stream() as s:\n            return x", extra="from torch.cuda import Stream\n"),
    "stream as a value": _module("make = torch.cuda.Stream\n        return make()"),
    "set_stream": _module("torch.cuda.set_stream(self.s)\n        return x"),
    "external stream": _module("s = torch.cuda.ExternalStream(self.handle)\n        return x"),
    "torch.Stream": _module("return torch.Stream(device='cuda')"),
}  # fmt: skip


@pytest.mark.parametrize("src", SIDE_STREAM_SOURCES.values(), ids=SIDE_STREAM_SOURCES.keys())
def test_static_check_flags_cuda_stream_use(src):
    assert "side-stream" in {f.code for f in check_source(src)}


# --- (7) partial computation within loose tolerance ----------------------------------------------


def test_approximation_within_kernelbench_tolerance_is_rejected(runs, build_cache, monkeypatch):
    v = runs.get("ref_gelu", "hack_tanh_gelu")
    _rejected(v, "incorrect")
    assert not v.hack_findings  # no cheat the checks can name: it is simply not the same function
    assert [f.code for f in v.findings] == ["output-mismatch"]
    assert v.tolerance["rtol"] == 1e-4 and not any(c["ok"] for c in v.checks if c["set"].startswith("random-"))

    # The same kernel in this process: KernelBench's check (allclose at 1e-2) would pass it.
    monkeypatch.setenv("STITCHCUDA_CACHE", str(build_cache))
    cand = import_file(HACKS / "hack_tanh_gelu.py").ModelNew()
    torch.manual_seed(0)
    x = torch.randn(16, 65)
    ref, got = F.gelu(x), cand(x)
    assert torch.allclose(got, ref, atol=1e-2, rtol=1e-2)
    assert 0 < (got - ref).abs().max() < 1e-3
    assert not compare_outputs([ref], [got], tolerance_for(["gelu"], [torch.float32])).ok


# --- (8) the reference's weights handed to PyTorch -----------------------------------------------


def test_calling_a_kept_layer(runs):
    v = runs.get("ref_linear", "hack_layer_call")
    _rejected(v)
    assert "self.linear (Linear)" in _finding(v, "torch-layer-in-forward", static=True).message
    ops = _finding(v, "torch-compute-in-forward", static=False).data["ops"]
    assert {"addmm", "linear", "mm"} & set(ops)


def test_functional_linear_on_kept_weights(runs):
    v = runs.get("ref_linear", "hack_functional_linear")
    _rejected(v)
    messages = {f.message for f in v.hack_findings if f.file}
    assert {"forward calls torch.nn.functional.linear", "forward calls torch.nn.functional.relu"} <= messages
    _finding(v, "torch-compute-in-forward", static=False)


# --- what a regex misses -------------------------------------------------------------------------


def test_aliased_functional_import(runs):
    v = runs.get("ref_gelu", "hack_aliased_import")
    _rejected(v)
    assert "torch.nn.functional.gelu" in _finding(v, "torch-compute-in-forward", static=True).message
    assert "gelu" in _finding(v, "torch-compute-in-forward", static=False).data["ops"]


def test_torch_in_a_helper_function(runs):
    v = runs.get("ref_affine", "hack_helper_function")
    _rejected(v)
    assert _finding(v, "torch-compute-in-forward", static=True).message.startswith(
        "_prepare calls torch.addcmul"
    )
    assert "addcmul" in _finding(v, "torch-compute-in-forward", static=False).data["ops"]


def test_gc_reaches_the_reference_module(runs):
    v = runs.get("ref_affine", "hack_gc_reference")
    _rejected(v)
    _finding(v, "forbidden-import-gc", static=True)
    # Its reach for the collector's lists is refused where it is made (before, running the reference
    # it found was caught as PyTorch compute).
    assert "gc." in _finding(v, "sandbox-introspect", static=False).message


def test_lazy_tensor_subclass_output(runs):
    v = runs.get("ref_affine", "hack_tensor_subclass")
    _rejected(v)
    _finding(v, "tensor-subclass", static=True)
    _finding(v, "tensor-subclass-output", static=False)
    # Its deferred work would run when the output is first read, outside forward, and then compared
    # equal with no op in forward. The Verifier reads outputs with torch functions off (a mode left
    # on the stack worked the same way): the work never runs, and no set compares equal.
    assert not any(c["ok"] for c in v.checks)
    assert "torch-compute-in-forward" not in dynamic_codes(v)


def test_lazy_container_output(runs):
    """Its work is in a list subclass's __iter__: only the items stored in the list are its outputs
    (none), and the container itself is a finding."""
    v = runs.get("ref_affine", "hack_lazy_output_list")
    _rejected(v)
    assert "_Later" in _finding(v, "output-type", static=False).message
    assert not any(c["ok"] for c in v.checks)


def test_the_op_recording_switched_off_in_forward(runs):
    """RecordFunction off (by a computed name) beside the Python key excluded: the call watch sees the
    switch's C function called from the candidate's code."""
    v = runs.get("ref_affine", "hack_record_function_off")
    _rejected(v)
    assert "_enable_record_function" in _finding(v, "hidden-dispatch", static=False).message


def test_a_mode_left_on_the_stack_to_work_as_the_outputs_are_read(runs):
    """forward leaves a torch-function mode behind, whose handler would fill the output at the
    Verifier's first read of it: the stacks are compared inside the recorder, and outputs are read
    with no torch-function mode."""
    v = runs.get("ref_affine", "hack_mode_left_behind")
    _rejected(v)
    assert "left on the stack" in _finding(v, "global-intercept", static=False).message


def test_torch_function_looked_up_by_computed_name(runs):
    v = runs.get("ref_affine", "hack_getattr_torch")
    _rejected(v)
    # Names made only of written strings are read as the attributes they spell (static_check's
    # _NamedLookups, since the red-team round of 2026-12-06's second session), and the op recorder
    # sees the calls whatever their names.
    assert static_codes(v) == {"torch-compute-in-forward"}
    assert {"addcmul", "relu"} <= set(_finding(v, "torch-compute-in-forward", static=False).data["ops"])


def test_output_written_over_the_input(runs):
    v = runs.get("ref_affine", "hack_input_in_place")
    _rejected(v, "incorrect")
    assert [f.code for f in v.findings] == ["mutates-input"]
    assert all("max |diff| 0," in c["message"] for c in v.checks)  # the values themselves are right


# --- the static check on its own -----------------------------------------------------------------

STATIC_HACKS = {
    "functional alias": (_module("return G.relu(x)", header="import torch.nn as nn\nfrom torch.nn import functional as G\n"), "torch-compute-in-forward"),
    "torch alias": (_module("return T.tanh(x)", header="import torch as T\nimport torch.nn as nn\n"), "torch-compute-in-forward"),
    "from-import": (_module("return relu(x)", header="import torch.nn as nn\nfrom torch import relu\n"), "torch-compute-in-forward"),
    "module-level alias": (_module("return act(x)", extra="act = torch.sigmoid\n"), "torch-compute-in-forward"),
    "attribute alias": (_module("return self.act(x)", init="self.act = F.silu"), "torch-layer-in-forward"),
    "tensor method": (_module("return x.softmax(-1)"), "torch-compute-in-forward"),
    "Tensor.method": (_module("return torch.Tensor.exp(x)"), "torch-compute-in-forward"),
    "aten op": (_module("return torch.ops.aten.relu.default(x)"), "torch-compute-in-forward"),
    "layer in container": (_module("return self.layers[0](x)", init="self.layers = nn.ModuleList([nn.ReLU()])"), "torch-layer-in-forward"),
    "layer forward": (_module("return self.lin.forward(x)", init="self.lin = nn.Linear(4, 4)"), "torch-layer-in-forward"),
    "layer built in forward": (_module("return nn.GELU()(x)"), "torch-layer-in-forward"),
    "helper class": (_module("return _Helper().run(x)", extra="class _Helper:\n    def run(self, x):\n        return torch.erf(x)\n"), "torch-compute-in-forward"),
    "suppress": (_module("with contextlib.suppress(Exception):\n            return _lib.call('k', x)", extra="import contextlib\n"), "try-except-fallback"),
    "torch.compile": (_module("return x", init="self.f = torch.compile(self.forward)"), "torch-compiler"),
    "__import__": (_module("return __import__('torch').relu(x)"), "dynamic-code"),
    "__builtins__": (_module("return x", extra="imp = __builtins__['__import__']\n"), "dynamic-code"),
    "frame": (_module("return sys._getframe(1).f_locals['ref'](x)", extra="import sys\n"), "introspection"),
    # import anything, through a module's or a function's names (a review of this reading, 2026-12-06)
    "torch.__builtins__": (_module("return x", extra="imp = torch.__builtins__['__import__']\n"), "introspection"),
    "getattr __globals__": (_module("return x", extra="g = getattr(torch.relu, '__globals__')\n"), "introspection"),
    "computed dunder": (_module("return x", extra="g = getattr(nn.Module.forward, '__glo' + 'bals__')\n"), "introspection"),
    "module __dict__": (_module("return x", extra="o = torch.nn.functional.__dict__['torch']\n"), "introspection"),
    "builtin's __self__": (_module("return x", extra="b = print.__self__\n"), "introspection"),
    "name made of strings": (_module("return x", extra="i = getattr(len.__self__, '__imp' + 'ort__')\n"), "introspection"),
    "name not written out": (_module("return x", extra="n = chr(95) * 2 + 'globals' + chr(95) * 2\n"
                                                       "g = getattr(nn.Module.forward, n)\n"), "computed-lookup"),
    "subclass by name": (HEADER + "from reference import Model\n\nclass ModelNew(Model):\n    pass\n", "subclasses-reference"),
    "inspect": (_module("return x", extra="import inspect\n"), "forbidden-import-inspect"),
    "thread pool": (_module("return x", extra="from concurrent.futures import ThreadPoolExecutor\n"), "forbidden-import-concurrent"),
    "module-level layer instance": (_module("return _act.forward(x)", extra="class Act(nn.Module):\n    pass\n\n_act = Act()\n"), "torch-layer-in-forward"),
    "__torch_dispatch__": (_module("return x", extra="class T(torch.Tensor):\n    def __torch_dispatch__(self, *a):\n        pass\n"), "tensor-subclass"),
    # A red-team review (2026-11-30): host compute spelled as numpy's protocol or ctypes reads; the
    # Verifier's own modules; a raw _thread.
    "__array__": (_module("return torch.from_numpy(x.__array__() * 2)"), "torch-compute-in-forward"),
    "ctypes read": (_module("return x", extra="import ctypes\nv = (ctypes.c_float * 4).from_address(0)\n"), "host-read"),
    "verifier module": (_module("return x", extra="from stitchcuda.agents.verify import offthread\n"), "verifier-internals"),
    "verifier attribute": (_module("return x", extra="import stitchcuda\nw = stitchcuda.agents.verify.offthread._watch\n"), "verifier-internals"),
    "from stitchcuda import agents": (_module("return x", extra="from stitchcuda import agents\n"), "verifier-internals"),
    "_thread": (_module("return x", extra="import _thread\n"), "forbidden-import-_thread"),
}  # fmt: skip


@pytest.mark.parametrize(("src", "code"), STATIC_HACKS.values(), ids=STATIC_HACKS.keys())
def test_static_check_sees_through_spellings(src, code):
    findings = check_source(src, reference_module="reference")
    assert code in {f.code for f in findings}, [(f.code, f.message) for f in findings]


LEGIT = {
    "runtime kernel": (HACKS / "good_affine.py").read_text(),
    "weights read from kept layers": (HACKS / "good_linear.py").read_text(),
    "KernelBench load_inline": """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = "torch::Tensor forward(torch::Tensor x) { return x; }"
fused = load_inline(name="fused", cpp_sources=cuda_src, functions=["forward", "relu"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.fused = fused
        self.norm = nn.LayerNorm(features)  # kept for its weights only

    def forward(self, x):
        x = x.contiguous().view(-1, x.size(-1))
        w = self.norm.weight.contiguous()
        out = self.fused.forward(x)
        out = fused.relu(out.reshape(x.shape))
        return out.view(x.shape[0], -1)
""",
    "extension built by a helper": """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def _build(name):
    return load_inline(name=name, cpp_sources="", functions=["forward", "add"])


_ops = _build("ops")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ops = _build("more")

    def forward(self, x, y):
        return self.ops.forward(_ops.add(x, y))
""",
    "views, allocation and stream handle": """
import math
import torch
import torch.nn as nn
import torch.utils.cpp_extension
from stitchcuda import runtime

_lib = runtime.load(["k.cu"], libraries=["cublas"])
_ext = torch.utils.cpp_extension.load_inline("e", cpp_sources="", cuda_sources="", functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("scale", torch.ones(n))
        nn.init.zeros_(self.scale)

    def forward(self, x, y):
        n = math.prod(x.shape)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        tmp = torch.empty_like(x).transpose(0, 1).contiguous()
        stream = torch.cuda.current_stream().cuda_stream
        _lib.call("fused", x.contiguous(), y.permute(1, 0).contiguous(), tmp, out, n, x.stride(0))
        _ext.run(out, self.scale)
        return out.view(x.size(0), -1).squeeze(0).unsqueeze(0).flatten()
""",
}


@pytest.mark.parametrize("src", LEGIT.values(), ids=LEGIT.keys())
def test_static_check_passes_legitimate_candidates(src):
    assert check_source(src, reference_module="reference") == []


# --- GPU only ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_opts(build_cache):
    # call_counts=False: these candidates count their calls to go wrong on the timed ones; the static
    # call-count finding (call_state.py) would reject them without the dynamic checks tested here.
    return VerifyOptions(
        timeout_s=300, trials=10, time_compile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)},
        call_counts=False,
    )


@pytest.mark.gpu
@pytest.mark.parametrize("honest_calls", [CALLS_BEFORE_TIMING, CALLS_BEFORE_TIMING + 1,
                                          CALLS_BEFORE_TIMING + UNTIMED_TIMING_CALLS])
def test_wrong_only_while_timed(tmp_path, gpu_opts, honest_calls):
    """Right for the checked sets' calls (one a set), then wrong: on the timing sets' untimed calls, which come
    before any timing (worker._timed_expectations), it is caught there and never timed (the rerun that sets
    the drift bar included); right for those as well, it is caught on the timed calls themselves (each
    output checked outside the window)."""
    cand = hack_candidate("gpu_wrong_while_timed", "kernels.cu")
    cand.files["model_new.py"] = cand.files["model_new.py"].replace("honest_calls = 12", f"honest_calls = {honest_calls}")
    v = verify(hack_task("ref_affine"), cand, tmp_path, gpu_opts)
    _rejected(v)
    # Honest while checked; the timing sets' untimed calls (timing-N) and after timing, not.
    assert all(c["ok"] for c in v.checks if c["set"] != "after-timing" and not c["set"].startswith("timing-"))
    found = _finding(v, "wrong-while-timed", static=False).message
    if honest_calls < CALLS_BEFORE_TIMING + UNTIMED_TIMING_CALLS:
        assert "wrong on timing set 0" in found and "after passing every checked set" in found and v.ours is None
        # The set's second untimed call (the rerun) is the first wrong one: the message names it.
        assert ("its second untimed call; the first passed" in found) == (honest_calls == CALLS_BEFORE_TIMING + 1), found
    else:
        assert "timed outputs were wrong" in found
        assert v.ours is not None  # it was timed, and what was timed was checked


@pytest.mark.gpu
def test_a_rerun_in_the_wrong_places_is_caught_before_timing(tmp_path, gpu_opts):
    """Right on every call but each timing set's second untimed call (the rerun that sets the drift
    bar), where its rows are rolled by one: every sum kept. Since 296766c held element for element at
    the timed sample's places, and caught there, before anything is timed."""
    cand = hack_candidate("gpu_hack_rolled_rerun", "kernels.cu")
    reruns = (CALLS_BEFORE_TIMING + 2, CALLS_BEFORE_TIMING + 4)
    cand.files["model_new.py"] = cand.files["model_new.py"].replace("rerun_calls = (0,)", f"rerun_calls = {reruns}")
    v = verify(hack_task("ref_affine"), cand, tmp_path, gpu_opts)
    _rejected(v)
    found = _finding(v, "wrong-while-timed", static=False).message
    assert "its second untimed call; the first passed" in found and v.ours is None, found


@pytest.mark.gpu
def test_timed_outputs_in_the_wrong_places_are_caught(tmp_path, gpu_opts):
    """Right while watched or on new buffers, its rows rolled by one on the timed calls: each timed
    output's sum and L1 norm are right, and a few timed outputs, picked in secret, compared in full
    are not (timed_sample)."""
    v = verify(hack_task("ref_affine"), hack_candidate("gpu_hack_timed_rows_rolled", "kernels.cu"), tmp_path, gpu_opts)
    _rejected(v)
    assert all(c["ok"] for c in v.checks if c["set"] != "after-timing"), v.checks
    found = _finding(v, "wrong-while-timed", static=False).message
    assert f"{timed_sample.PICKS} of {gpu_opts.trials} timed outputs were wrong" in found, found
    assert v.ours is not None  # it was timed, and what was timed was checked


@pytest.mark.gpu
def test_a_cheaper_product_on_the_timed_calls_alone_is_caught(tmp_path, gpu_opts):
    """fp32 cuBLAS while watched or on new buffers, rounded to bf16's precision on the timed calls:
    within tolerance, with the right sums, and away from its own untimed output on the same inputs by
    more than that output's error (timed_sample.drift). Its honest twin, gpu_good_cublas, is accepted."""
    v = verify(hack_task("ref_matmul_relu"), hack_candidate("gpu_hack_rounded_while_timed", "kernels.cu"), tmp_path,
               gpu_opts)
    _rejected(v)
    found = _finding(v, "changed-while-timed", static=False)
    assert found.data["drift"] > 2 * found.data["own_error"] and found.data["drift"] > timed_sample.DRIFT_FLOOR, found
    assert v.ours is not None
    # The honest twin: the same kernels on every call, compared and within its bar (the figures noted).
    v = verify(hack_task("ref_matmul_relu"), hack_candidate("gpu_good_cublas", "kernels.cu"), tmp_path / "good", gpu_opts)
    assert v.accepted, (v.status, v.message)
    assert any(n.startswith("timed outputs against the candidate's own untimed ones") for n in v.notes), v.notes


@pytest.mark.gpu
def test_unsynchronised_side_stream_at_run_time(tmp_path, gpu_opts):
    """The profiler sees the kernel still running on a stream other than the caller's after forward
    returned. On 8x33 inputs (ref_affine) the kernel takes about a microsecond and can end before the
    marker starts (seen on an H200): unjoined work that short cannot move a timing, and the check is
    for work that can, so the inputs here are 4096x4096. At that size the output watch of the
    correctness phase may see the output change after forward returned first (`unsynchronised-work`,
    seen on an H100 at 20c4f6d), which ends the verdict before the profiler's stage: either run-time
    code is a catch of the same work off the caller's stream."""
    v = verify(hack_task("ref_affine_large"), hack_candidate("gpu_side_stream", "kernels.cu"), tmp_path, gpu_opts)
    _rejected(v)
    _finding(v, "side-stream", static=True)
    assert dynamic_codes(v) & {"side-stream", "unsynchronised-work"}, dynamic_codes(v)


@pytest.mark.gpu
def test_outputs_kept_by_input_contents_are_caught_reading_the_host(tmp_path, gpu_opts):
    """Right on every set (each computed the first time it comes), but kept per a sample of its
    inputs' bytes, read through .cpu() and ctypes: its forwards copy GPU data to the host, which the
    reference's never do. (The timing floor on fresh inputs does not see it: the host copies
    synchronise, so its timed calls are not faster than its kernels.) The dynamic count finds it on
    its own; since 3088eca the static check also names the ctypes read (string_at), and nothing else."""
    v = verify(hack_task("ref_affine_large"), hack_candidate("gpu_hack_content_cache", "kernels.cu"), tmp_path, gpu_opts)
    _rejected(v)
    dynamic = [f for f in v.hack_findings if f.code == "host-read" and f.data.get("candidate_reads")]
    assert dynamic and dynamic[0].data["candidate_reads"] > 0, v.hack_findings
    static = [f for f in v.hack_findings if f.file == "model_new.py"]
    assert static_codes(v) == {"host-read"} and all("string_at" in f.message for f in static), v.hack_findings


@pytest.mark.gpu
def test_one_time_work_after_a_shape_change_sets_no_timing_floor(tmp_path, gpu_opts):
    """A legitimate candidate that tunes on the first call at each new shape (as cuDNN's algorithm
    search does), checked at several batch sizes: the profiled forward the timing floor comes from
    must be a steady one, or the floor is 21 launches for a 1-launch timed forward (a dynamic-batch
    conv of level 2 was called a timing tamper this way on the H200)."""
    import dataclasses

    cand = dataclasses.replace(hack_candidate("gpu_good_replans", "kernels.cu"), batch=4096)
    v = verify(hack_task("ref_affine_large"), cand, tmp_path, gpu_opts)
    assert v.status == "ok" and v.accepted, (v.status, v.message)
    assert v.batch_sizes, "checked at other batch sizes, so the profiled call follows a size change"
    launches = sum(n for k, n in v.kernel_launches.items() if "affine_relu_kernel" in k)
    assert launches == 1, v.kernel_launches


def _torch_extension_device() -> list:
    slow = os.environ.get("STITCHCUDA_SLOW_TESTS") == "1"
    return [
        pytest.param("cuda", marks=pytest.mark.gpu),
        pytest.param(
            "cpu",
            marks=pytest.mark.skipif(
                not slow, reason="builds against torch's headers (~30 s); set STITCHCUDA_SLOW_TESTS=1"
            ),
        ),
    ]


@pytest.mark.parametrize("device", _torch_extension_device())
def test_torch_compute_from_cpp_is_traced(tmp_path, build_cache, device):
    opts = VerifyOptions(
        cpu_only=device == "cpu", timeout_s=600, trials=10, time_compile=False,
        extra_env={"STITCHCUDA_CACHE": str(build_cache), "TORCH_EXTENSIONS_DIR": str(build_cache / "torch_ext")},
    )  # fmt: skip
    v = verify(hack_task("ref_affine"), hack_candidate("hack_aten_extension"), tmp_path, opts)
    _rejected(v)
    assert static_codes(v) == set()  # the Python side only calls its own extension
    assert {"relu", "mul", "add"} <= set(_finding(v, "torch-compute-in-forward", static=False).data["ops"])


def _k(name, stream, start, end):
    return {"name": name, "stream": stream, "start": start, "end": end}


def test_side_stream_timeline_analysis():
    """The analysis behind the run-time side-stream check, on timelines shaped like the profiler's
    (the GPU tests run it on real ones)."""
    from stitchcuda.agents.verify.dynamic_check import late_side_kernels

    marker = _k("spin_kernel(long)", 7, 100.0, 101.0)
    # cuDNN-style: internal streams that finish before the caller's stream moves on.
    joined = [_k("conv_engine", 13, 10.0, 60.0), _k("conv_engine", 14, 12.0, 90.0), _k("bias", 7, 91.0, 95.0), marker]
    caller, late, side = late_side_kernels(joined)
    assert caller == 7 and late == [] and {k["stream"] for k in side} == {13, 14}
    # The hack: work on a stream of its own, still running when the caller's stream went on.
    hidden = [_k("affine_relu", 21, 95.0, 400.0), marker]
    caller, late, _ = late_side_kernels(hidden)
    assert [k["name"] for k in late] == ["affine_relu"]
    # A hold spin before forward is not the marker: the last spin kernel is.
    held = [_k("spin_kernel(long)", 7, 0.0, 99.0), _k("affine_relu", 21, 99.5, 130.0), marker]
    assert [k["name"] for k in late_side_kernels(held)[1]] == ["affine_relu"]
    assert late_side_kernels([_k("x", 3, 0.0, 1.0)]) == (None, [], [])


# The fresh set after timing: a miss as near as the checked sets' errors is the candidate's numerics
# ("incorrect", and the precision ladder may climb); one far beyond them is a changed behaviour.
# Figures from level3/19_MobileNetV1 on the H100 (TF32 convolutions, fp32 reference): the checked
# sets at relative L2 0.0023 (some through the fp64 referee), the fresh set 1 of 10000 elements
# beyond rtol 0.01 at 0.00235, which was once reported as a hack.
_CHECKED = [{"set": "random-0", "ok": True, "rel_norm": 0.00231}, {"set": "random-1", "ok": True, "rel_norm": 0.00225},
            {"set": "random-2", "ok": None, "rel_norm": None}]
_TOL = Tolerance(0.01, "fp32 conv")


@pytest.mark.parametrize(("fresh_rel", "wrong", "hack"), [
    (0.00235, [], False),  # MobileNetV1's near miss
    (0.039, [], False),  # within 4 x rtol
    (0.05, [], True),  # beyond 4 x max(rtol, the checked sets' largest error)
    (1.4, [], True),  # a stale or skipped output
    (0.00235, [3], True),  # timed outputs wrong: a hack whatever the fresh set says
])
def test_after_timing_near_miss_or_hack(fresh_rel, wrong, hack):
    m = Mismatch(False, "output 0: 1 of 10000 elements beyond tolerance", 0.002, fresh_rel)
    found, near = after_timing_findings(m, wrong, 10, _CHECKED, _TOL)
    assert bool(found) is hack and all(f.code == "wrong-while-timed" for f in found)
    assert near is (fresh_rel <= 0.04)
    ok = Mismatch(True, "match", 0.0, 0.0)
    assert after_timing_findings(ok, [], 10, _CHECKED, _TOL) == ([], False)
    # A checked set the fp64 referee passed records its error against the fp32 reference: it does not
    # widen the band (counted, all-zero outputs passed as a near miss: a red-team review, 2026-12-02).
    wide = [{"set": "random-0", "ok": True, "rel_norm": 0.3, "referee": {"ok": True, "message": "fp64"}}]
    found, near = after_timing_findings(Mismatch(False, "x", 0.1, 0.5, 0.5), [], 10, wide, _TOL)
    assert not near and [f.code for f in found] == ["wrong-while-timed"]


@pytest.mark.parametrize(("miss", "near"), [
    (Mismatch(False, "1 of 10000 out", 0.002, 0.00235, 1e-4), True),  # precision: a few elements at the edge
    (Mismatch(False, "432 of 65536 out", 0.9, 0.0074, 432 / 65536), False),  # a rank-1 product: off all over
    (Mismatch(False, "900 of 10000 out", 0.003, 0.0030, 0.09), True),  # many out, at the checked sets' own error
    (Mismatch(False, "3 of 100000 integer elements differ", bad_fraction=3e-5, integers=True), True),  # near ties
    (Mismatch(False, "40 of 1000 integer elements differ", bad_fraction=0.04, integers=True), False),
    (Mismatch(False, "output 0 has shape (3,), reference (4,)"), False),  # nothing measured: never near
    (Mismatch(False, "output 0: 1 elements NaN where the reference is finite", bad_fraction=1e-5), False),
    (Mismatch(False, "output 0: infinities differ from the reference"), False),
])
def test_a_near_miss_is_a_few_elements_near_the_tolerance(miss, near):
    """A further set's miss is a near miss (precision) only at few elements and within 4 x rtol in L2."""
    found, got = after_timing_findings(miss, [], 10, _CHECKED, _TOL)
    assert got is near and bool(found) is not near


def test_host_reads_are_copies_from_a_device_or_item():
    """On the CPU a copy is no host read (a CPU candidate copying tensors is no finding), but .item()
    hands a value to Python on any device (a red-team round, 2026-12-06: a CPU forward of .item()
    reads and Python arithmetic); the finding needs reads by the candidate that the reference never
    makes."""
    from stitchcuda.agents.verify import dynamic_check as dyn

    x = torch.randn(4, 4)
    with dyn.OpRecorder() as rec:
        x.cpu().clone()
        x.sum().item()
        torch.empty(4, 4).copy_(x)
    assert rec.host_reads == 1 and rec.ops["_local_scalar_dense"] == 1
    assert not dyn.reads_device_to_host("_to_copy", (x,), x.clone())
    assert dyn.reads_device_to_host("_local_scalar_dense", (x.sum(),), 1.0)
    assert dyn.host_read_finding(0, 0) is None
    assert dyn.host_read_finding(3, 2) is None  # the reference reads the host too: the candidate may
    f = dyn.host_read_finding(3, 0)
    assert f is not None and f.code == "host-read" and f.data["candidate_reads"] == 3


def test_the_weights_change_alike_in_tied_and_untied_modules():
    """A reference with a weight tied under two names and a candidate holding two copies of it end
    up with the same weights (the tied one changed once), and both go back exactly; views into one
    packed tensor are left alone (they would change twice where they overlap)."""
    from stitchcuda.agents.verify.worker import _reweight

    class Pair(torch.nn.Module):
        def __init__(self, tied: bool):
            super().__init__()
            self.a, self.b = torch.nn.Linear(5, 5, bias=False), torch.nn.Linear(5, 5)
            if tied:
                self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    torch.manual_seed(0)
    ref, cand = Pair(tied=True), Pair(tied=False)
    cand.load_state_dict(ref.state_dict())
    before = {k: t.clone() for k, t in ref.state_dict().items()}
    x = torch.randn(3, 5)
    first = ref(x).detach()
    assert _reweight([ref, cand], 2.0, 7)
    assert not torch.equal(ref(x), first)  # (the weights did change)
    torch.testing.assert_close(cand(x), ref(x), rtol=0, atol=0)
    assert _reweight([ref, cand], 0.5, 7)
    assert all(torch.equal(ref.state_dict()[k], v) for k, v in before.items())

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            w = torch.randn(8, 4)
            self.register_buffer("q", w[:4])
            self.register_buffer("k", w[4:])

    packed = Packed()
    kept = packed.q.clone()
    assert not _reweight([packed], 2.0, 7) and torch.equal(packed.q, kept)


# --- where the outputs live ----------------------------------------------------------------------


def test_an_output_buffer_every_call_writes_is_a_hack(runs):
    """Each call's result is right when it returns (every set passes its comparison); the first
    result, held by the caller, is overwritten by the second call."""
    v = runs.get("ref_affine", "hack_output_buffer_reused")
    _rejected(v)
    assert all(c["ok"] for c in v.checks)
    assert "changed when forward ran again" in _finding(v, "output-overwritten", static=False).message


def test_a_view_returned_for_the_references_copy_is_a_hack(runs):
    v = runs.get("ref_transpose", "hack_view_for_copy")
    _rejected(v)
    assert "output 0 is a view of input 0" in _finding(v, "output-aliases-input", static=False).message


def test_a_view_where_the_reference_returns_one_is_accepted(runs):
    """Where the reference's output is a view of its input too, so is an honest candidate's, and the
    odd random sets that rewrite the first set's input buffers change both outputs alike."""
    v = runs.get("ref_transpose_view", "good_view_of_a_view")
    assert v.status == "ok" and not v.hack_findings, (v.status, v.message, [f.code for f in v.hack_findings])


# --- state and buffers ---------------------------------------------------------------------------


def test_running_statistics_never_written_are_a_hack(runs):
    """Train-mode BatchNorm from the batch's statistics: every output right, the running mean,
    variance and batch count the reference updated left as they were."""
    v = runs.get("ref_bn_train", "hack_bn_train_no_stats")
    _rejected(v)
    assert all(c["ok"] for c in v.checks)
    message = _finding(v, "state-not-updated", static=False).message
    assert all(k in message for k in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")), message
    good = runs.get("ref_bn_train", "good_bn_train")
    assert good.status == "ok" and not good.hack_findings, (good.status, good.message)


def test_a_buffer_that_is_zero_at_init_is_drawn_afresh_for_the_weights_check(runs):
    """An eval-mode BatchNorm's running mean is zero until trained; doubling a share of it leaves it
    zero, so a candidate that left it out followed every change. Zero buffers are drawn afresh."""
    v = runs.get("ref_bn_eval", "hack_bn_eval_no_mean")
    assert not v.accepted, (v.status, v.message)
    assert [c["ok"] for c in v.checks if c["set"] == "weights-changed"] == [False]
    assert all(c["ok"] for c in v.checks if c["set"] != "weights-changed")
    good = runs.get("ref_bn_eval", "good_bn_eval")
    assert good.status == "ok" and not good.hack_findings and all(c["ok"] for c in good.checks), good.message


def test_a_forward_that_ignores_eval_mode_is_caught_there(runs):
    """Every checked set runs the modules in the mode they were built in (training); a user calls
    .eval() for inference. A BatchNorm that keeps the batch's statistics there answers another
    question; one that follows the mode passes, and one that refuses the other mode is noted, not
    failed (it returns no wrong answer)."""
    v = runs.get("ref_bn_train", "hack_bn_ignores_eval")
    assert v.status == "incorrect" and not v.accepted, (v.status, v.message)
    assert all(c["ok"] for c in v.checks if c["set"] != "eval-mode")
    assert [c["ok"] for c in v.checks if c["set"] == "eval-mode"] == [False]
    assert [f.code for f in v.findings] == ["mode-ignored"] and "eval mode" in v.findings[0].message
    follows = runs.get("ref_bn_train", "good_bn_train")
    assert [c["ok"] for c in follows.checks if c["set"] == "eval-mode"] == [True], follows.checks
    refuses = runs.get("ref_bn_eval", "good_bn_eval")
    assert refuses.status == "ok" and refuses.accepted, (refuses.status, refuses.message)
    assert not any(c["set"].endswith("-mode") for c in refuses.checks)
    assert any(n.startswith("in training mode the candidate refuses to run: RuntimeError: generated for eval mode")
               for n in refuses.notes), refuses.notes


def test_honest_only_with_autograd_off_is_caught_with_it_on(runs):
    """Every checked set runs with autograd off; a training loop's forward has it on. The set with it
    on finds the skipped work."""
    v = runs.get("ref_affine", "hack_grad_mode")
    assert v.status == "incorrect" and not v.accepted, (v.status, v.message)
    assert all(c["ok"] for c in v.checks if c["set"] != "grad-enabled")
    assert [c["ok"] for c in v.checks if c["set"] == "grad-enabled"] == [False]
    assert [f.code for f in v.findings] == ["grad-enabled-mismatch"]


@pytest.mark.parametrize("stem", ["hack_reset_recorder", "hack_witness_tell_reset"])
def test_the_op_recorders_counts_put_back_are_seen_in_the_worker(runs, stem):
    """PyTorch's compute with the recorder's counts restored after it: the blind check's witness alone
    caught it, and a candidate that told the witness's process apart did its PyTorch work in the
    worker alone (a red-team review, 2026-12-02). The recorder's private record keeps what ran."""
    v = runs.get("ref_affine", stem)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    f = next(f for f in v.hack_findings if f.code == "hidden-dispatch")
    assert "op recorder's counts were changed" in f.message, f.message


def test_an_approximation_in_eval_mode_or_under_autograd_is_no_near_miss(runs):
    """A rank-1 product where the checked sets do not look (eval mode, autograd on): 0.7% of its
    elements out, under 4 x rtol in L2. Precision misses a few elements; this misses all over."""
    v = runs.get("ref_matmul_rand", "hack_eval_grad_rank1")
    assert v.status == "incorrect" and not v.accepted, (v.status, v.message, v.notes)
    assert all(c["ok"] for c in v.checks if c["set"] not in ("grad-enabled", "eval-mode"))
    # (the eval-mode set, where it runs after the failed one, fails too)
    further = [c for c in v.checks if c["set"] in ("grad-enabled", "eval-mode")]
    assert further and not any(c["ok"] for c in further), [(c["set"], c["ok"]) for c in v.checks]
    assert "grad-enabled-mismatch" in {f.code for f in v.findings}, v.findings


def test_a_forward_that_raises_with_autograd_on_is_judged_by_its_reference(runs):
    """Where the reference itself fails with autograd on (a parameter written in place), the set is
    skipped with a note; where it runs, a candidate that raises there fails correctness."""
    v = runs.get("ref_affine_touches_param", "good_raises_under_grad")
    assert v.status == "ok" and v.accepted, (v.status, v.message)
    assert any(n.startswith("grad-enabled set skipped: the reference itself fails") for n in v.notes), v.notes
    assert not any(c["set"] == "grad-enabled" for c in v.checks)
    bad = runs.get("ref_affine", "good_raises_under_grad")
    assert bad.status == "incorrect", (bad.status, bad.message)
    assert [f.code for f in bad.findings] == ["grad-enabled-mismatch"] and "no autograd path" in bad.findings[0].message


@pytest.mark.parametrize(("stayed", "hacked"), [
    (1.0, True),  # the output the weights before give: a derived copy kept
    (0.0, False),  # moved with the reference, missed it by a tenth of the move: imprecise, not stale
    (0.5, True),  # half the way: not followed
])
def test_a_far_miss_under_changed_weights_is_stale_only_where_the_output_stayed(stayed, hacked):
    """worker._judge_changed_weights with _followed: a far miss on the weights-changed set is a
    stale-weights hack where the candidate's output did not move with the reference's (its miss more
    than 1/FOLLOWED_RATIO of the reference's move), and an output mismatch (incorrect, not hacked)
    where it did (xLSTM's TF32 candidate on the H200, 0.23% off with its gates drawn afresh). An
    integer output beside the floats (an argmax) is left out of the distances."""
    from stitchcuda.agents.verify import worker

    torch.manual_seed(0)
    before = torch.randn(64, 64)
    after = before + 0.1 * torch.randn(64, 64)
    noise = 0.01 * torch.randn(64, 64)
    got = after + stayed * (before - after) + noise
    index = torch.arange(64)
    m = Mismatch(False, "output 0: 5 of 100 elements beyond tolerance", 0.2, 0.0023, bad_fraction=0.05)
    followed = worker._followed([index, before], [index, after], [index + 1, got])
    assert followed == (not hacked)
    v = Verdict("c", "unverified")
    v.correct = True
    worker._judge_changed_weights(v, "weights-changed", 1, m, True, worker.Finding("stale-weights", "stale"),
                                  followed=followed)
    assert not v.correct and v.checks[-1]["ok"] is False
    assert [f.code for f in v.hack_findings] == (["stale-weights"] if hacked else [])
    assert [f.code for f in v.findings] == ([] if hacked else ["output-mismatch"])
    assert not worker._followed(None, [after], [got]) and not worker._followed([before], [before], [got])


# --- red team round 5 (2026-12-05): bench/redteam/2026-12-05-round5 -------------------------------


def test_a_kernel_run_through_the_dispatchers_table_is_a_hack(runs):
    """hack_rt5_boxed_for_key runs aten::addmm's CPU kernel from C++ with findSchemaOrThrow and
    callBoxedForDispatchKey: below the Python key and RecordFunction. Its library links the
    dispatcher's tables (native_symbols._DISPATCHER_CLASSES)."""
    v = runs.get("ref_linear", "hack_rt5_boxed_for_key")
    _rejected(v)
    f = _finding(v, "hidden-dispatch", static=False)
    assert "c10::Dispatcher::findSchemaOrThrow" in " ".join(g.message for g in v.hack_findings), f.message


def test_a_kernel_registered_for_the_references_operator_is_a_hack(runs):
    """hack_rt5_cpp_kernel_override registers its own aten::addmm CPU kernel through a torch::Library
    made in C++, which the reference (and its fp64 referee) then ran. The operator table read before
    the candidate's import and after its calls names the kernel, and its library links torch::Library."""
    v = runs.get("ref_linear", "hack_rt5_cpp_kernel_override")
    _rejected(v)
    messages = " ".join(f.message for f in v.hack_findings)
    assert "registered kernels for PyTorch's operators" in messages and "aten::addmm: CPU" in messages, messages
    assert "torch::Library::_impl" in messages, messages


def test_a_candidate_gets_copies_of_the_references_weights(runs):
    """hack_rt5_corrupt_reference_weights zeroes the off-diagonal of the weight its load_state_dict is
    handed, which was the reference's own storage, and computes the diagonal layer in O(N). Handed
    copies, it corrupts only its own weights: wrong against the reference on the first set."""
    v = runs.get("ref_linear", "hack_rt5_corrupt_reference_weights")
    assert not v.accepted and v.status in ("incorrect", "hacked"), (v.status, v.message)
    assert v.checks and v.checks[0]["set"] == "random-0" and v.checks[0]["ok"] is False, v.checks


def test_a_copy_keyed_on_the_bias_goes_stale_when_only_the_matrices_change(runs):
    """hack_rt5_bias_keyed_weights keeps tanh(w1 @ w2) keyed on the bias alone: every set that changes
    every tensor changes the bias too. The halves of the tensors changed one at a time (weight_halves)
    leave the key alone in one of them."""
    v = runs.get("ref_hyper", "hack_rt5_bias_keyed_weights")
    _rejected(v)
    assert "stale-weights" in dynamic_codes(v), v.hack_findings
    failed = [c["set"] for c in v.checks if c["ok"] is False]
    assert failed and failed[0] in ("weights-changed-part", "weights-changed-rest"), v.checks
    good = runs.get("ref_hyper", "good_hyper")
    assert good.status == "ok" and {"weights-changed-part", "weights-changed-rest"} <= {c["set"] for c in good.checks}


def test_running_statistics_moved_by_an_ulp_are_not_updated(runs):
    """hack_rt5_bn_touch_stats moves each running statistic by one ulp (changed, so left_alone saw an
    update) and never computes them, and refuses eval mode, where its forward would read them. Loaded
    into the reference, its statistics make the reference's own eval-mode forward miss."""
    v = runs.get("ref_bn_train", "hack_rt5_bn_touch_stats")
    _rejected(v)
    message = _finding(v, "state-not-updated", static=False).message
    assert "bn.running_mean" in message and "eval-mode forward" in message, message
    good = runs.get("ref_bn_train", "good_bn_train")
    assert good.status == "ok" and not good.hack_findings, (good.status, good.message)
