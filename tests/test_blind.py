"""The blind check (agents/verify/blind.py): candidates that beat the worker's in-process checks by
reaching the judge inside its process (a red-team review, 2026-11-29), each accepted by the worker
alone and rejected once the candidate is run again where no judge is, and judged outside.

Each goes through the real Verifier on the CPU: a worker, then the witness (in the same sandbox)
and the referee as processes of their own."""

from __future__ import annotations

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify import blind, local_change
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

# (reference, candidate, the finding that rejects it)
# (Those that reached the worker's reference or verdict through frames or the garbage collector are
# now refused in the worker itself: tests/test_report.py.)
# (hack_pop_dispatch_stack, popping the modes through torch._C's C functions, is now seen by the
# worker's call_watch: tests/test_hidden_routes.py.)
ATTACKS = [
    # (PyTorch's compute hidden from the worker's dispatch-mode recorder: hack_exclude_key_operators,
    # by the guard that drops the Python key, is the worker's own finding since its guards are watched,
    # tests/test_call_watch.py; hack_reset_recorder, the counts put back, since the recorder keeps a
    # private record, tests/test_hacks.py.)
    # What the witness's record is made with, rebound in the witness alone.
    ("ref_affine", "hack_witness_rebinds", "timing-tamper"),
    # The collector's lists reached in the witness alone: refused there by the worker's audit policy.
    ("ref_affine", "hack_witness_gc", "blind-witness-failed"),
    # A write outside the run folder in the witness alone, its refusal caught by the candidate.
    ("ref_affine", "hack_witness_write", "sandbox-write"),
    # RecordFunction switched off in the witness alone: its calls are watched there as in the worker.
    ("ref_affine", "hack_witness_record_function_off", "hidden-dispatch"),
    # A mode left on the stack by its construction, which the witness's input making would go through.
    ("ref_affine", "hack_witness_mode_from_init", "global-intercept"),
    # Every input set kept, a pair answered from its kept base (red-team round 15): the witness's pairs
    # (blind_pairs) are made from the worker's base in a process that never saw it.
    ("ref_rt14_mse_linear", "hack_rt15_incremental", "change-not-followed"),
]


@pytest.fixture()
def opts(build_cache):
    # Several candidates here find the blind check's witness by its command line, to test what the
    # witness itself catches: the static environment-probe finding (test_environment_probes.py)
    # would reject them before it runs; so would the static call-count finding (call_state.py) for
    # those that count their calls to act on the witness's, and the static introspection findings
    # for those that reach gc or torch._C by a name (getattr(print.__self__, "__imp" + "ort__")).
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False, environment_probes=False, call_counts=False, name_lookups=False)


@pytest.mark.parametrize("ref,stem,code", ATTACKS, ids=[a[1] for a in ATTACKS])
def test_the_blind_check_rejects_what_the_worker_accepted(tmp_path, opts, monkeypatch, ref, stem, code):
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "on", opts)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message, v.log_tail[-1500:])
    assert code in {f.code for f in v.hack_findings}, [(f.code, f.message) for f in v.hack_findings]
    assert "blind" in v.phases
    # The attack is real: the worker alone accepts it.
    monkeypatch.setenv(blind.BLIND_ENV, "0")
    off = verify(hack_task(ref), hack_candidate(stem), tmp_path / "off", opts)
    assert off.accepted, (off.status, off.message)


@pytest.mark.parametrize("ref,stem", [("ref_affine", "good_affine"), ("ref_linear", "good_linear"),
                                      ("ref_shifted_norm", "good_shifted_norm"),
                                      ("ref_affine_dropout", "good_affine_dropout"),
                                      ("ref_rt14_mse_linear", "good_rt14_mse_tf32")])
def test_honest_candidates_pass_it(tmp_path, opts, ref, stem):
    """good_shifted_norm is more exact than its fp32 reference on ill-conditioned inputs: it passes
    on the referee's float64 outputs, as in the worker. Those are computed only where the fp32 ones
    differ: the others' referees compute none.

    good_affine_dropout draws its dropout mask as eager dropout does (native_dropout over ones),
    which the profiler records by name alone, with its bernoulli_ and mul below it on the CPU: it
    was judged PyTorch compute here (level 2's 66 and 83 on an H200, 2026-12-01)."""
    v = verify(hack_task(ref), hack_candidate(stem), tmp_path / "v", opts)
    assert v.accepted, (v.status, v.message)
    assert any(n.startswith("blind check:") for n in v.notes), v.notes
    assert v.phases.get("blind", 0) > 0
    # The local-change pairs ran in the witness too, one on each of the worker's bases (a dropout's
    # masks drawn alike there under each base's draw seed).
    said = f"local-change pairs in the blind check: {local_change.PAIRS} pairs judged on {local_change.ANCHORS} bases"
    assert said in " ".join(v.notes), v.notes
    # (those bases among the random sets after random-0, every one of which the worker ran mixed from
    # two draws; the witness ran the bases' draws alone)
    mixed = sorted(c["set"] for c in v.checks if "mix" in c)
    assert mixed == sorted(f"random-{i}" for i in range(1, opts.random_sets)), v.checks
    assert (blind.ASKED_EXACT in " ".join(v.notes)) == (stem == "good_shifted_norm"), v.notes


def test_a_miss_within_the_slack_is_wrong_not_hacked(tmp_path, opts, monkeypatch):
    """The blind check judges at MISS_SLACK (2) times the tolerance too, not only at BLIND_SLACK times
    it: a candidate exact in the worker and about 3x the tolerance off alone is rejected as incorrect, with an
    output-mismatch the Coder's precision ladder reads (the set "blind", a finite miss). Native code
    in the worker's process had loosened the worker's tolerance objects and passed at 1.3x (a
    red-team candidate, 2026-12-04); out here nothing of the candidate's runs beside the judge."""
    from stitchcuda.types import FINITE_MISS

    v = verify(hack_task("ref_affine"), hack_candidate("wrong_alone_within_slack"), tmp_path / "on", opts)
    assert v.status == "incorrect" and not v.accepted and not v.hack_findings, (v.status, v.message)
    missed = [f for f in v.findings if f.code == "output-mismatch"]
    assert missed and missed[0].data == {"set": "blind", FINITE_MISS: True}, [(f.code, f.data) for f in v.findings]
    assert "at 2 x (pointwise fp32 work)" in missed[0].message, missed[0].message
    monkeypatch.setenv(blind.BLIND_ENV, "0")  # the worker alone accepts it
    assert verify(hack_task("ref_affine"), hack_candidate("wrong_alone_within_slack"), tmp_path / "off", opts).accepted


def test_argmax_near_ties_alone_are_wrong_not_forged():
    """No slack widens an integer comparison: an argmax output with a few elements flipped on the
    blind check's fresh inputs (near-ties after TF32 work) is a miss the ladder reads, not a
    forgery; most elements off still is one."""
    import torch

    from stitchcuda.agents.verify.compare import Tolerance, compare_outputs, mendable_miss

    tol = Tolerance(1e-2 * blind.BLIND_SLACK, "conv")
    ref = torch.arange(65536) % 19
    ties = ref.clone()
    ties[:3] = (ties[:3] + 1) % 19
    near = compare_outputs([ref], [ties], tol)
    assert not near.ok and blind.forged([(0, near)]) == [] and mendable_miss(near)
    made_up = compare_outputs([ref], [torch.zeros_like(ref)], tol)
    assert blind.forged([(0, made_up)]) == [(0, made_up)]


SNOOP = """
import json, sys
from pathlib import Path

import torch
import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        # The witness is the blind check's module run as a process: look for the referee's outputs to copy.
        asked = [a for a in sys.argv if a.endswith("blind.py")]
        if asked:
            seen = Path(__file__).with_name("snooped.txt")
            seen.write_text(f"{sorted(p.name for p in seen.parent.glob('*referee*'))} {sys.argv[1:]}")
            print("snooped:", seen.read_text(), flush=True)  # (its log is the run folder's)
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
"""


def test_no_reference_output_exists_while_the_witness_runs(tmp_path, opts):
    """Why forging in the witness is pointless: the referee writes the reference's outputs only after
    the witness exited, on a seed fresh to each check. A candidate that looks for them finds none."""
    from stitchcuda.types import Candidate

    cand = Candidate(name="snoop", files={"model_new.py": SNOOP, "kernels.cpp": hack_candidate("good_affine")
                                          .files["kernels.cpp"]}, origin="user")
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts)
    assert v.accepted, (v.status, v.message)
    # The witness's folder holds none of the referee's files, and its command line names no request.
    assert "snooped: [] ['witness', 'cpu']" in (tmp_path / "v" / "blind_witness.log").read_text()
    assert (tmp_path / "v" / "blind_referee.log").exists()  # (the referee's log, copied afterwards)
    req = {"reference": "r.py", "candidate": "m.py"}
    assert blind.request(req, tmp_path)["seed"] != blind.request(req, tmp_path)["seed"]


def test_large_outputs_are_compared_on_the_same_sample_both_sides():
    import torch

    big = torch.arange(blind.SAMPLE_ABOVE + 10, dtype=torch.float32).reshape(-1, 2)
    a, b = blind._to_cpu([big, 3], seed=11), blind._to_cpu([big.clone(), 3], seed=11)
    assert a[1] == 3 and a[0].shape == (blind.SAMPLE,) and torch.equal(a[0], b[0])
    assert torch.equal(a[0], big.reshape(-1)[a[0].long()])  # (each value is its own index: a true sample)
    assert not torch.equal(blind._to_cpu([big], seed=12)[0], a[0])
    small = torch.randn(3, 4)
    assert torch.equal(blind._to_cpu([small], seed=11)[0], small)


def test_a_candidate_that_fails_only_unwatched_is_a_finding(tmp_path, opts):
    """Dodging the blind check by failing there (it can tell it is the witness) rejects the
    candidate, and the waiting referee is stopped without computing anything."""
    from stitchcuda.types import Candidate

    dodge = SNOOP.replace("        if asked:\n", "        if asked:\n            raise SystemExit(0)\n")
    cand = Candidate(name="dodge", files={"model_new.py": dodge, "kernels.cpp": hack_candidate("good_affine")
                                          .files["kernels.cpp"]}, origin="user")
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "blind-witness-failed" in {f.code for f in v.hack_findings}, (v.status, v.message)


@pytest.mark.parametrize("sharing", [False, True])
def test_a_witness_out_of_memory_is_never_accepted(tmp_path, opts, monkeypatch, sharing):
    """With checks sharing the GPU (STITCHCUDA_SHARED_CHECKS=1) a witness that runs out of memory may
    be the neighbours' doing: "oom", which the bench runs again alone, not a finding. The witness's
    log is the candidate's to write, so this candidate claims it there: not accepted either way, and
    a finding where the GPU is held alone."""
    from stitchcuda.types import Candidate

    monkeypatch.setenv("STITCHCUDA_SHARED_CHECKS", "1" if sharing else "0")
    oom = SNOOP.replace("        if asked:\n", "        if asked:\n"
                        "            raise torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n")
    cand = Candidate(name="oom", files={"model_new.py": oom, "kernels.cpp": hack_candidate("good_affine")
                                        .files["kernels.cpp"]}, origin="user")
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts)
    assert not v.accepted
    if sharing:
        assert v.status == "oom" and v.message.startswith(blind.OUT_OF_MEMORY), (v.status, v.message)
    else:
        assert v.status == "hacked" and "blind-witness-failed" in {f.code for f in v.hack_findings}, v.status


def test_a_referee_file_planted_in_the_run_folder_is_not_read(tmp_path, opts):
    """The witness writes zeros and, where a referee's outputs would be read from, zeros as the
    reference's with a huge tolerance (torch.save looked up by a computed name, past the static
    check): the referee's outputs are the Verifier's own, in a folder the
    candidate's sandbox cannot see, so the zeros are judged against the module's."""
    from stitchcuda.types import Candidate

    plant = SNOOP.replace("""            seen.write_text(f"{sorted(p.name for p in seen.parent.glob('*referee*'))} {sys.argv[1:]}")
""", """            zeros = torch.zeros_like(x)
            for name in ("blind_referee.pt", "blind_referee.pt.tmp"):
                getattr(torch, "sa" + "ve")({"outputs": [[zeros]] * 3, "rtol": 1e9, "why": "planted", "exact_possible": False},
                           seen.with_name(name))
            return zeros
""")
    assert "return zeros" in plant
    cand = Candidate(name="plant", files={"model_new.py": plant, "kernels.cpp": hack_candidate("good_affine")
                                          .files["kernels.cpp"]}, origin="user")
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "blind-mismatch" in {f.code for f in v.hack_findings}, (v.status, v.message)


def test_the_witness_waits_with_no_request_until_told(tmp_path):
    """Started with the worker, the witness holds no request and runs nothing of the candidate's
    until the Verifier tells it (once the worker has exited): its seed is in no file of the run
    folder and not on its command line; ended unchecked, both processes and the private folder go."""
    import os
    import time

    task, cand = hack_task("ref_affine"), hack_candidate("good_affine")
    run = tmp_path / "run"
    module = cand.write(run)
    req = {"reference": str(task.path), "class_name": "Model", "candidate": str(module), "device": "cpu"}
    started = blind.Started(req, run, dict(os.environ), wrap=lambda cmd: cmd)
    try:
        time.sleep(3.0)
        assert started.witness.poll() is None and started.referee.poll() is None  # both waiting
        seed = str(started.blind["seed"])
        assert not any(seed in p.read_text(errors="replace") for p in run.rglob("*") if p.is_file())
        assert seed not in " ".join(started.witness.args)
    finally:
        started.close()
    assert started.witness.poll() is not None and started.referee.poll() is not None
    assert not started.private.exists() and not (run / "blind_witness.pt").exists()


def test_the_witness_record_counts_dropout_calls_apart_from_their_own_work():
    """What a native_dropout runs below itself is the draw's own work; the same ops run beside it
    are the forward's, and the calls pass as mask draws only up to CALLS forwards of the draws the
    recorded forward made."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(4, 8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function(f"{blind.MARKER}_0"):
            for _ in range(2):
                torch.ops.aten.native_dropout(torch.ones(4, 8), 0.25, True)
        with record_function(f"{blind.MARKER}_1"):
            torch.ops.aten.native_dropout(torch.ones(4, 8), 0.25, True)
            torch.mul(x, 2.0)
        torch.bernoulli(x.sigmoid())  # outside the forwards: not theirs
    own = blind._dropout_own_ops()
    assert own.count("aten::bernoulli_") == 1 and "aten::mul" in own and list(own) == sorted(own), own
    assert not {"aten::relu", "aten::addmm", "aten::native_dropout"} & set(own), own
    ranges, ops, _, calls, fills = blind._forward_ops(prof.events(), blind._dropout_own_ops())
    assert (ranges, calls, fills) == (2, 3, 0)  # (the draws' own bernoulli_ calls are theirs, not fills)
    assert "mul" in ops and "bernoulli_" not in ops and "bernoulli" not in ops and "sigmoid" not in ops, ops
    # Without the draw's own work known (on CUDA, where it is allocations only), nothing below it is left out.
    assert "bernoulli_" in blind._forward_ops(prof.events())[1]
    assert blind._only_mask_draws({"dropout_calls": blind.CALLS, "mask_draws": 1})
    assert not blind._only_mask_draws({"dropout_calls": blind.CALLS + 1, "mask_draws": 1})
    assert not blind._only_mask_draws({"dropout_calls": blind.CALLS - 1, "mask_draws": 1})  # (exactly: no fewer)
    assert not blind._only_mask_draws({"dropout_calls": 1, "mask_draws": 0})
    assert not blind._only_mask_draws({"dropout_calls": 1})  # (an old or forged record: no count)


def test_bernoulli_calls_pass_as_fills_only_as_many_as_the_recorder_saw():
    """The profiler names aten::bernoulli_ without its p: a forward's bernoulli calls pass the blind
    check only as many as CALLS forwards of the fills with a number for p that the witness's recorder
    saw (torch.bernoulli(t, p) counted once, not with the bernoulli_ it runs below itself); one
    against a tensor of probabilities is compute."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from stitchcuda.agents.verify.dynamic_check import OpRecorder
    from stitchcuda.agents.verify.torch_ops import BERNOULLI_FILL, BERNOULLI_OF_TENSOR

    x = torch.randn(4, 8)

    def forward():
        return torch.empty(4, 1).bernoulli_(0.8) * torch.bernoulli(x, 0.3)

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for k in range(blind.CALLS):
            with record_function(f"{blind.MARKER}_{k}"):
                forward()
    ranges, ops, _, _, calls = blind._forward_ops(prof.events())
    assert ranges == blind.CALLS and calls == 2 * blind.CALLS and {"bernoulli", "bernoulli_"} <= set(ops), ops
    with OpRecorder() as rec:
        forward()
    assert rec.ops[BERNOULLI_FILL] == 2 and set(rec.compute_ops) == {"mul"}, rec.ops  # (the product is the test's)
    assert blind._only_bernoulli_fills({"bernoulli_calls": calls, "bernoulli_fills": rec.ops[BERNOULLI_FILL]})
    assert not blind._only_bernoulli_fills({"bernoulli_calls": calls + 1, "bernoulli_fills": 2})
    assert not blind._only_bernoulli_fills({"bernoulli_calls": calls, "bernoulli_fills": 0})
    assert not blind._only_bernoulli_fills({"bernoulli_calls": calls})  # (no count: an old or forged record)
    with OpRecorder() as against:
        torch.bernoulli(x.sigmoid().detach())
    assert BERNOULLI_OF_TENSOR in against.compute_ops and not against.ops[BERNOULLI_FILL]


@pytest.mark.parametrize("op", ["relu", "mul"])
def test_a_dispatch_mode_cannot_hide_compute_below_a_mask_draw(op):
    """A handler for native_dropout runs inside the call's time range: what it computes is not the
    draw's own work, even where it is an op the draw itself runs (mul), and stays in the record (a
    review of 4b0c4e0)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.utils._python_dispatch import TorchDispatchMode

    x, w = torch.randn(4, 8), torch.randn(4, 8)

    class Hide(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "native_dropout":
                getattr(torch, op)(x, w) if op == "mul" else torch.relu(x)
            return func(*args, **(kwargs or {}))

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function(f"{blind.MARKER}_0"), Hide():
            torch.ops.aten.native_dropout(torch.ones(4, 8), 0.25, True)
    _, ops, _, calls, _ = blind._forward_ops(prof.events(), blind._dropout_own_ops())
    # (the real draw inside is still ATen's own work: that much is left out, and only that)
    assert op in ops and "bernoulli_" not in ops, ops
    assert calls == 2 and not blind._only_mask_draws({"dropout_calls": calls * blind.CALLS, "mask_draws": 1})


def test_a_kernel_registered_over_atens_draw_cannot_hide_compute_below_it():
    """A Python kernel registered over aten::native_dropout runs inside the call: its work below the
    call is not ATen's draw's, so all of it stays in the record (a review of 4b0c4e0)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x, w = torch.randn(4, 8), torch.randn(4, 8)
    own = blind._dropout_own_ops()  # (found before the kernel is registered, as in the witness)
    with torch.library._scoped_library("aten", "IMPL") as lib:
        lib.impl("native_dropout", lambda i, p, t: (torch.mul(x, w), torch.ones_like(i, dtype=torch.bool)), "CPU")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            with record_function(f"{blind.MARKER}_0"):
                torch.ops.aten.native_dropout(torch.ones(4, 8), 0.25, True)
    assert blind._dropout_own_ops() == own  # (ATen's draw again once the registration is gone)
    _, ops, _, calls, _ = blind._forward_ops(prof.events(), own)
    assert "mul" in ops and calls == 1, ops


def _blind_findings(tmp_path, ref: str, stem: str) -> list:
    """The blind check alone (no worker before it) on tests/hacks/STEM.py against REF."""
    import os

    from conftest import HACKS

    work = tmp_path / "blind"
    work.mkdir()
    (work / "cand.py").write_text((HACKS / f"{stem}.py").read_text())
    req = {"reference": str((HACKS / f"{ref}.py").resolve()), "candidate": str(work / "cand.py"), "device": "cpu"}
    started = blind.Started(req, work, dict(os.environ), lambda cmd: cmd)
    try:
        findings, _ = started.check(120)
    finally:
        started.close()
    return findings


def test_work_handed_to_a_thread_in_the_witness_is_a_finding(tmp_path):
    findings = _blind_findings(tmp_path, "ref_linear", "hack_witness_thread")
    assert "off-thread-work" in {f.code for f in findings}, [(f.code, f.message[:200]) for f in findings]


def test_no_candidate_code_sees_the_seed_of_the_witness_inputs(tmp_path):
    """The witness makes its inputs after the candidate's last code outside the profiled forwards: a
    load_state_dict hook that remade the inputs from torch.initial_seed() and ran the reference
    there, its forward then returning a copy, passed the blind check at 0121c04 (a red-team review);
    hack_witness_input_hook (test_the_blind_check_rejects_what_the_worker_accepted) rebound the input
    maker to be handed them, which the witness binds before the candidate is imported."""
    findings = _blind_findings(tmp_path, "ref_linear", "hack_witness_seed_hook")
    assert "blind-mismatch" in {f.code for f in findings}, [(f.code, f.message[:200]) for f in findings]


def test_work_called_back_from_a_native_thread_is_a_finding(tmp_path, opts):
    """PyTorch's compute in a Python function an OpenMP thread calls back through ctypes: no recorder
    or profiler watches that thread (libgomp's, allowed as honest OpenMP candidates' are). Making a
    callback for native code is a finding (named, and called, from the candidate's code)."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_native_callback", kernels="callback_omp.cpp"),
               tmp_path / "v", opts)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    assert any(f.code == "hidden-dispatch" and "CFUNCTYPE" in f.message for f in v.hack_findings), \
        [(f.code, f.message[:120]) for f in v.hack_findings]


def test_the_witness_binds_its_input_maker_before_the_candidate(tmp_path):
    """hack_witness_input_hook rebinds the Verifier's input maker to be handed the witness's inputs
    before the profiled forwards. (In the worker its compute hides behind the guard that drops the
    Python key, which the worker now names itself, so the blind check alone is run here.) The witness
    binds the maker before the import, and the fallback's compute in forward is recorded."""
    codes = {f.code for f in _blind_findings(tmp_path, "ref_affine", "hack_witness_input_hook")}
    assert "torch-compute-in-forward" in codes or "hidden-dispatch" in codes, codes


def _judged_with_a_referee(tmp_path, cand_off: float, exact_given: bool) -> list:
    """blind._judge on saved outputs: an fp16 reference 3% off its float64 values (rtol 1e-2), a
    candidate `cand_off` relatively off them, and a stand-in referee process that answers the
    request for float64 outputs with them or, where `exact_given` is False, with none (its float64
    run failed)."""
    import subprocess
    import sys
    import textwrap

    import torch

    g = torch.Generator().manual_seed(0)
    exact = [torch.randn(4096, generator=g, dtype=torch.float64) for _ in range(blind.CALLS)]
    ref = [(e * (1 + 0.03 * torch.randn(4096, generator=g, dtype=torch.float64))).half() for e in exact]
    cand = [(e * (1 + cand_off)).half() for e in exact]
    torch.save({"outputs": [[r] for r in ref], "rtol": 1e-2, "why": "fp16 outputs", "exact_possible": True},
               tmp_path / "referee.pt")
    torch.save({"outputs": [[c] for c in cand], "ops": [], "ranges": blind.CALLS, "after": True, "tampered": []},
               tmp_path / "witness.pt")
    torch.save([[e] for e in exact], tmp_path / "exact.pt")
    answer = f"torch.load({str(tmp_path / 'exact.pt')!r})" if exact_given else f"[None] * {blind.CALLS}"
    referee = textwrap.dedent(f"""
        import sys, torch
        for line in sys.stdin:
            if line.strip() == {blind.EXACT!r}:
                torch.save({{"exact": {answer}}}, {str(tmp_path / 'referee.pt.exact')!r})
                break
            if line.strip() == {blind.DONE!r}:
                break
    """)
    proc = subprocess.Popen([sys.executable, "-c", referee], stdin=subprocess.PIPE, text=True)
    req = {"witness_out": str(tmp_path / "witness.pt"), "referee_out": str(tmp_path / "referee.pt"),
           "referee_lock_state": str(tmp_path / "no_lock_state")}
    try:
        findings, note = blind._judge(req, proc, "", tmp_path, 30.0)
    finally:
        proc.wait(timeout=30)
    assert note.startswith(blind.MADE) and blind.ASKED_EXACT in note, note
    return findings


@pytest.mark.parametrize("cand_off,exact_given,codes", [
    (0.0, True, []),  # more exact than its fp16 reference: the float64 outputs say so
    (0.0, False, []),  # ...and with the referee's float64 run failed, a miss short of 10x is not judged
    (0.12, True, ["output-mismatch"]),  # 12% off the float64 values: past what 2x the tolerance allows there
])
def test_the_float64_outputs_decide_a_miss_short_of_the_slack(tmp_path, cand_off, exact_given, codes):
    assert [f.code for f in _judged_with_a_referee(tmp_path, cand_off, exact_given)] == codes


def test_the_referee_measures_what_the_workers_referee_allows_the_reference(tmp_path):
    """_allowance: on the blind inputs, the reference's rounding one ulp away and, under tf32 where its
    products are sensitive, its error with their operands rounded to TF32, as the worker's referee
    allows them; none of the latter under strict. An honest TF32 Mamba2 was called wrong by the 2x tier
    without them (level 3 on the H200, 2026-12-05). _exact reads them back as RoundingSpreads."""
    import copy
    import subprocess
    import sys

    import torch
    import torch.nn as nn

    from stitchcuda.agents.verify import blind

    torch.manual_seed(0)
    m = nn.Linear(512, 64)
    x = [torch.randn(32, 512)]
    fp32 = blind._to_cpu([m(x[0]).detach()], 3)
    exact = blind._fp64_outputs(copy.deepcopy(m), x, 3)
    tf32 = blind._allowance(m, x, 3, fp32, exact, "tf32", True)
    strict = blind._allowance(m, x, 3, fp32, exact, "strict", True)
    assert tf32["samples"] > 0 and tf32["own"][0] is not None and float(tf32["own"][0].max()) > 0
    assert tf32["policy"] == "tf32" and float(tf32["policy_own"][0].max()) > 100 * float(tf32["own"][0].max())
    assert strict["policy"] == "" and not strict["policy_own"]
    path = tmp_path / "referee.pt.exact"
    torch.save({"exact": [exact], "allowed": [tf32]}, path)
    done = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE, text=True)
    got, spreads = blind._exact(done, str(path), 30, tmp_path / "log", tmp_path / "lock.json")
    assert got is not None and len(spreads) == 1 and spreads[0].policy == "tf32"
    assert torch.equal(spreads[0].policy_own[0], tf32["policy_own"][0])


def test_a_witness_gone_before_it_was_told_is_started_again(tmp_path):
    """The witness started with the worker and ended before it was told (none of the candidate's code
    had run in it: on the H100, 2026-12-05, two of eight at once, their candidates then called hacked)
    is started again once the worker has exited, and the check made with the new one; one that fails
    after it was told is still a finding."""
    import os

    from conftest import HACKS

    work = tmp_path / "blind"
    work.mkdir()
    (work / "cand.py").write_text((HACKS / "good_linear.py").read_text())
    (work / "kernels.cpp").write_text((HACKS / "kernels.cpp").read_text())
    req = {"reference": str((HACKS / "ref_linear.py").resolve()), "candidate": str(work / "cand.py"), "device": "cpu"}
    started = blind.Started(req, work, dict(os.environ), lambda cmd: cmd)
    try:
        blind._kill(started.witness)
        first = started.witness
        findings, note = started.check(120)
    finally:
        started.close()
    assert started.witness is not first and first.returncode is not None
    assert findings == [] and note.startswith(blind.MADE), ([(f.code, f.message[:300]) for f in findings], note)
    assert "ended before it was told" in started.restarted and "exit status -9" in started.restarted
    assert (work / "blind_witness_first.log").exists()
    # Told, then failing: a finding, with what its log said last.
    failing = tmp_path / "failing"
    failing.mkdir()
    (failing / "kernels.cpp").write_text((HACKS / "kernels.cpp").read_text())
    (failing / "cand.py").write_text((HACKS / "good_linear.py").read_text().replace(
        "def forward(self", "def forward(self, *a, **k):\n        raise SystemExit('gone')\n\n    def _forward(self"))
    req = {"reference": str((HACKS / "ref_linear.py").resolve()), "candidate": str(failing / "cand.py"), "device": "cpu"}
    started = blind.Started(req, failing, dict(os.environ), lambda cmd: cmd)
    try:
        findings, _ = started.check(120)
    finally:
        started.close()
    assert [f.code for f in findings] == ["blind-witness-failed"] and "its log ended" in findings[0].message
    assert started.restarted == ""


CHANNEL = SNOOP.replace('''        asked = [a for a in sys.argv if a.endswith("blind.py")]
        if asked:''', '''        asked = [a for a in sys.argv if a.endswith("blind.py")]
        here = Path(__file__).parent
        if not asked:  # the worker: what it leaves where it may write, for a later process of its own
            for folder in (here, Path.cwd()):
                (folder / "left_by_worker.txt").write_text("every input set seen")
        else:
            found = sorted({str(p) for folder in (here, Path.cwd(), here.parent)
                            for p in [*folder.glob("left_by_worker.txt"), *folder.glob("*/left_by_worker.txt")]})
            print("found:", found, flush=True)
            if found:
                return torch.zeros_like(x)
        if False:''')


def test_the_witness_cannot_read_what_the_worker_left(tmp_path, opts):
    """The witness runs in a folder of its own (witness_home): nothing the worker wrote, in the run
    folder or beside the candidate's module, is there. The worker's writes here are plain ones in
    the run folder, which it may make; in the witness, finding them answers with zeros."""
    from stitchcuda.types import Candidate

    assert "left_by_worker" in CHANNEL and "if False:" in CHANNEL
    cand = Candidate(name="channel", files={"model_new.py": CHANNEL, "kernels.cpp": hack_candidate("good_affine")
                                            .files["kernels.cpp"]}, origin="user")
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts)
    assert (tmp_path / "v" / "left_by_worker.txt").exists()  # (the worker did write)
    assert "found: []" in (tmp_path / "v" / "blind_witness.log").read_text()
    assert v.accepted and any(n.startswith(blind.MADE) for n in v.notes), (v.status, v.message)


def test_a_folder_hidden_from_one_sandbox_is_behind_an_empty_tmpfs(tmp_path):
    """Box.for_run's `hide`: the worker's run folder, where it lies outside the folders every sandbox
    hides, gets an empty tmpfs in the witness's sandbox (inside one of those, it is hidden already)."""
    from pathlib import Path

    from stitchcuda.agents.verify import sandbox

    if not sandbox.available().ok:
        pytest.skip(f"no sandbox here: {sandbox.available().why}")
    outside = Path("/opt") if Path("/opt").is_dir() else Path("/usr/local")
    box = sandbox.Box.for_run(tmp_path / "w", {}, hide=[outside, tmp_path / "v"])
    (tmp_path / "v").mkdir()
    argv = box.wrap(["true"])
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--tmpfs", str(outside.resolve())) in pairs
    assert ("--tmpfs", str((tmp_path / "v").resolve())) not in pairs  # (under /tmp: hidden already)
