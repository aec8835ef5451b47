"""The precision policy's switches (agents/verify/precision.py): set for the matched timing, put back
after it, whatever happens inside."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
import torch

from stitchcuda.agents.verify import compile_baseline, precision
from stitchcuda.agents.verify.compare import Tolerance


def flags() -> tuple[bool, bool, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                torch.get_float32_matmul_precision())


@pytest.mark.parametrize("policy, want", [("tf32", (True, True)), ("strict", (False, False))])
def test_under_sets_the_switches_and_restores_them(policy, want):
    before = flags()
    with precision.under(policy):
        assert flags()[:2] == want
    assert flags() == before


def test_switches_come_back_after_an_error():
    before = flags()
    with pytest.raises(RuntimeError), precision.under("tf32" if not before[0] else "strict"):
        raise RuntimeError("the timed call failed")
    assert flags() == before


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        precision.check("fp16")


def test_which_references_are_sensitive_to_tf32():
    assert precision.sensitive(["aten::addmm", "aten::relu"])
    assert precision.sensitive(["convolution.default"]) and precision.sensitive(["aten.bmm.default"])
    assert not precision.sensitive(["aten::relu", "aten::sum.dim_IntList", "aten::add.Tensor"])
    # Eval-mode attention and encoder layers run as one fused op with cuBLAS projections inside.
    assert precision.sensitive(["_native_multi_head_attention"]) and precision.sensitive(["_transformer_encoder_layer_fwd"])


def test_a_matched_timing_is_needed_only_where_a_switch_governs_an_op_of_the_reference():
    default = {"matmul": False, "cudnn": True}  # PyTorch's own defaults
    # A GEMM: TF32 turns its switch on; strict is PyTorch's default for it.
    assert precision.needs_matched("tf32", ["aten::addmm", "aten::relu"], default)
    assert not precision.needs_matched("strict", ["aten::addmm"], default)
    # A convolution: cuDNN's TF32 is on by default, so strict is the one that differs.
    assert not precision.needs_matched("tf32", ["aten::convolution"], default)
    assert precision.needs_matched("strict", ["aten.convolution.default"], default)
    # Pointwise work: no switch applies, the default figure is the matched one.
    assert not precision.needs_matched("tf32", ["aten::gelu", "aten::add.Tensor"], default)
    assert not precision.needs_matched("strict", ["aten::gelu"], default)
    # The process's own switches by default.
    with precision.under("tf32"):
        assert not precision.needs_matched("tf32", ["aten::mm"])
        assert precision.needs_matched("strict", ["aten::mm"])


def test_a_candidates_precision_names_the_policy_it_is_matched_with():
    from stitchcuda.types import policy_of

    assert [policy_of(p) for p in ("tf32", "3xtf32", "fp32")] == ["tf32", "tf32", "strict"]


def test_kernelbench_close_is_allclose_at_1e4_on_every_output():
    from stitchcuda.agents.verify.compare import kernelbench_close

    ref = [torch.tensor([1.0, -2.0, 1e-6]), 3]
    assert kernelbench_close(ref, [torch.tensor([1.0 + 1e-4, -2.0, 5e-5]), 3])  # atol + rtol * |ref|
    assert not kernelbench_close(ref, [torch.tensor([1.0 + 3e-4, -2.0, 0.0]), 3])
    assert not kernelbench_close(ref, [torch.tensor([1.0, -2.0, 1e-6]), 4])  # a non-tensor output differs
    assert not kernelbench_close(ref, [torch.tensor([1.0, -2.0]), 3])  # shape
    assert not kernelbench_close(ref, [torch.tensor([1.0, -2.0, 1e-6])])  # count
    nan = [torch.tensor([float("nan"), 1.0])]
    assert kernelbench_close(nan, [torch.tensor([float("nan"), 1.0])])
    assert not kernelbench_close(nan, [torch.tensor([0.0, 1.0])])


def test_the_verifier_records_kernelbench_s_check_on_each_random_set(tmp_path, build_cache):
    """A real verification on the CPU (the worker process, the candidate's own C++ kernel): every
    random input set carries KernelBench's 1e-4 result, adversarial sets do not, and the verdict
    sums them up."""
    from conftest import hack_candidate, hack_task

    from stitchcuda.agents.verify.verifier import VerifyOptions, verify

    opts = VerifyOptions(cpu_only=True, timeout_s=120.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task("ref_linear"), hack_candidate("good_linear"), tmp_path / "v", opts)
    assert v.accepted, (v.status, v.message, v.log_tail[-1500:])
    random = [c for c in v.checks if c["set"].startswith("random")]
    others = [c for c in v.checks if not c["set"].startswith("random")]
    assert random and all(c["at_1e-4"] is True for c in random)
    assert others and all("at_1e-4" not in c for c in others)
    assert v.correct_at_1e4 is True and v.to_dict()["correct_at_1e4"] is True
    assert v.precision == "tf32" and v.compiled_matched is None  # nothing timed on the CPU


@pytest.mark.parametrize("policy, want, tf32_calls", [("tf32", "tf32", True), ("strict", "fp32", False)])
def test_the_built_in_coder_builds_a_gemm_at_the_policy_s_precision(policy, want, tf32_calls):
    """Under strict, the first round is already full fp32 (no rung of the ladder may use TF32)."""
    from conftest import KERNELBENCH

    from stitchcuda.agents.coder import builtin
    from stitchcuda.agents.plan import planner
    from stitchcuda.task import find_task

    path = KERNELBENCH / "level2" / "9_Matmul_Subtract_Multiply_ReLU.py"
    if not path.exists():
        pytest.skip(f"KernelBench is not at {KERNELBENCH} (set KERNELBENCH_DIR)")
    task = find_task(path)
    task.precision = policy
    cand = builtin.code(task, planner.plan(task))
    assert cand is not None and cand.precision == want
    source = "\n".join(t for n, t in cand.files.items() if n.endswith(".cu"))
    assert ("FAST_TF32" in source) is tf32_calls


def test_the_bench_records_the_matched_ratio_the_precision_and_the_1e4_check(tmp_path):
    from stitchcuda import bench
    from stitchcuda.types import Candidate, Timing, Verdict

    def t(ms: float) -> Timing:
        return Timing(ms, ms, ms, 50)

    cand = Candidate(name="builtin", files={}, precision="tf32")
    # A GEMM: torch.compile timed again under TF32, the candidate's policy.
    gemm = Verdict("builtin", "ok", built=True, correct=True, eager=t(4.0), compiled=t(3.0), ours=t(1.0),
                   compiled_matched=t(1.5), compile_policy="tf32",
                   checks=[{"set": "random-0", "ok": True, "at_1e-4": False}])
    # Pointwise only: the default figure is the matched one.
    pw = Verdict("builtin", "ok", built=True, correct=True, eager=t(2.0), compiled=t(1.0), ours=t(0.8),
                 compile_policy="tf32", checks=[{"set": "random-0", "ok": True, "at_1e-4": True}])
    a = bench.entry_for(tmp_path / "1_gemm.py", gemm, cand, "")
    b = bench.entry_for(tmp_path / "2_pw.py", pw, cand, "")
    assert (a["compile_ms"], a["compile_matched_ms"], a["speedup_compile"], a["speedup_compile_matched"]) == (
        3.0, 1.5, 3.0, 1.5)
    assert (b["compile_matched_ms"], b["speedup_compile_matched"]) == (1.0, 1.25)
    assert (a["precision"], a["correct_at_1e4"], b["correct_at_1e4"]) == ("tf32", False, True)
    s = bench.summarize([a, b])
    assert s["geomean_speedup_compile_matched"] == pytest.approx((1.5 * 1.25) ** 0.5)
    assert (s["solved_matched_faster"], s["correct_at_1e4"]) == (2, 1)
    md = bench.markdown({"meta": {"command": "c", "commit": "x", "date": "d", "gpu": "g", "torch": "t",
                                  "coder": "builtin", "precision": "tf32"}, "problems": [a, b], "summary": s})
    assert "| 1_gemm.py | yes |  | 4.000 | 3.000 | 1.000 | 4.00 | 3.00 | 1.50 | tf32 | no |" in md
    assert "precision policy: tf32; vs torch.compile under each candidate's own policy: geomean 1.37x" in md


@pytest.mark.gpu
def test_torch_compile_is_timed_again_under_the_candidate_s_policy(tmp_path, build_cache):
    """On a GPU, a matmul reference: the candidate (cuBLAS, TF32 allowed) gets torch.compile timed
    under TF32 beside PyTorch's default, and the verdict's matched ratio uses it."""
    from conftest import hack_candidate, hack_task

    from stitchcuda.agents.verify.verifier import VerifyOptions, verify

    opts = VerifyOptions(timeout_s=300, trials=10, profile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task("ref_matmul_relu"), hack_candidate("gpu_good_cublas", "kernels.cu"), tmp_path / "v", opts)
    assert v.accepted, (v.status, v.message, v.log_tail[-1500:])
    assert v.compile_policy == "tf32" and v.compiled is not None and v.compiled_matched is not None
    assert v.speedup_compile_matched == pytest.approx(v.compiled_matched.median_ms / v.ours.median_ms)
    assert "compile-matched-timing" in v.phases
    assert v.correct_at_1e4 is not None


# --------------------------------------------------------------------------------------------
# The matched baseline must meet the check the candidate met (a 3xTF32 candidate is matched with
# torch.compile without TF32 where TF32 torch.compile misses the tolerance).

class _Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.lin(x))


def _sets():
    return [("random-0", 11, None, None), ("random-1", 12, None, [21, 22]), ("adversarial-large", 13, "large", None),
            ("batch-4", 14, ("batch", 4), None)]


def test_compile_baseline_checked_on_the_candidates_input_sets():
    torch.manual_seed(0)
    ref = _Affine().eval()
    inputs = list(compile_baseline.checked_inputs(_sets(), lambda: [torch.randn(8, 64)], torch.device("cpu")))
    assert [n for n, _ in inputs] == ["random-0", "random-1", "adversarial-large"]  # other batch sizes left out
    assert inputs[2][1][0].abs().max() > 100 * inputs[0][1][0].abs().max()  # the adversarial transform applied
    # A mixed set as the worker made it: random-1's draw with a share of its rows from seed 21's.
    from stitchcuda.inputs import make_inputs

    plain, donor = (make_inputs(lambda: [torch.randn(8, 64)], s, torch.device("cpu"))[0] for s in (12, 21))
    rows = [any(torch.equal(inputs[1][1][0][i], d[i]) for d in (plain, donor)) for i in range(8)]
    assert all(rows) and not torch.equal(inputs[1][1][0], plain)
    tol = Tolerance(1e-2, "matmul in reference")
    ops = Counter({"addmm": 1, "relu": 1})  # as trace_ops names them
    again = lambda: compile_baseline.checked_inputs(_sets(), lambda: [torch.randn(8, 64)], torch.device("cpu"))  # noqa: E731
    # The same math meets it; output off by 0.1% too (within 1e-2); off by 10% on the large set only: named.
    assert compile_baseline.compile_misses(ref, ref, again(), tol, ops) is None
    assert compile_baseline.compile_misses(ref, lambda x: ref(x) * 1.001, again(), tol, ops) is None

    def off_when_large(x):
        y = ref(x)
        return y * 1.1 if x.abs().max() > 100 else y

    why = compile_baseline.compile_misses(ref, off_when_large, again(), tol, ops)
    assert why is not None and why.startswith("adversarial-large:"), why
    assert "; fp64 referee: output 0 against the fp64 result" in why, why  # its own word kept beside
    # Only the sets the candidate passed are judged; a set the compiled module fails on is not judged.
    passed = lambda: compile_baseline.checked_inputs(_sets(), lambda: [torch.randn(8, 64)], torch.device("cpu"),  # noqa: E731
                                            {"random-0", "random-1"})
    assert compile_baseline.compile_misses(ref, off_when_large, passed(), tol, ops) is None

    def raises_when_large(x):
        if x.abs().max() > 100:
            raise ValueError("rejected")
        return ref(x)

    unjudged: list[str] = []
    assert compile_baseline.compile_misses(ref, raises_when_large, again(), tol, ops, unjudged=unjudged) is None
    assert len(unjudged) == 1 and unjudged[0].startswith("adversarial-large: ValueError: rejected"), unjudged
    # A reference that draws random numbers cannot be judged against a compiled one: no verdict.
    assert compile_baseline.compile_misses(ref, off_when_large, again(), tol, Counter({"native_dropout": 1})) is None


class _DropoutAffine(torch.nn.Module):
    """A Linear then training-mode dropout: every call draws a mask."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 32)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x))


def test_a_random_reference_is_judged_against_a_compile_that_draws_as_eager_does():
    """Level 2's 66 (a matmul, training dropout, softmax): the candidate left TF32 after missing on
    adversarial-large, while TF32 torch.compile, whose draws could not be set beside eager's, stood
    unjudged as its baseline. Compiled with eager's draws (fallback_random) and seeded alike, it is
    judged on the same sets; a wrong one is named, and without eager's draws nothing is judged."""
    from stitchcuda.agents.verify import worker

    torch.manual_seed(0)
    ref = _DropoutAffine().train()
    ops = Counter({"addmm": 1, "native_dropout": 1})
    again = lambda: compile_baseline.checked_inputs(_sets(), lambda: [torch.randn(8, 64)], torch.device("cpu"))  # noqa: E731
    args = next(iter(again()))[1]
    tol = Tolerance(1e-2, "matmul in reference")
    # The timed compile first, as the worker has it (with torch 2.11 on the H200 a second
    # torch.compile(ref) found its code; with 2.13 on the CPU it does not, so this passes either way).
    timed = torch.compile(ref)
    timed(*args)
    judged = compile_baseline.compiled_with_eager_draws(ref, "tf32", args, tol)
    assert judged is not None
    worker.same_draws(3)
    want = ref(*args)
    worker.same_draws(3)
    torch.testing.assert_close(judged(*args), want)  # eager's mask, not Inductor's own
    worker.same_draws(4)
    assert not torch.equal(ref(*args), want)  # (another seed, another mask: the draws are real)
    assert compile_baseline.compile_misses(ref, judged, again(), tol, ops, eager_draws=True) is None

    def off_when_large(x):
        y = judged(x)
        return y * 1.1 if x.abs().max() > 100 else y

    why = compile_baseline.compile_misses(ref, off_when_large, again(), tol, ops, eager_draws=True)
    assert why is not None and why.startswith("adversarial-large:"), why
    assert compile_baseline.compile_misses(ref, off_when_large, again(), tol, ops) is None


def test_a_compile_that_does_not_draw_as_eager_does_is_not_judged(monkeypatch):
    """Where the compiled module's draws are not eager's (on the H200 with torch 2.11, level 2's 66's
    mask was not), its output would miss for that alone: the probe without TF32 finds it and nothing
    is judged. Simulated with seeds that differ between the two calls."""
    torch.manual_seed(0)
    ref = _DropoutAffine().train()
    args = [torch.randn(8, 64)]
    seeds = iter(range(100, 200))
    monkeypatch.setattr(compile_baseline, "same_draws", lambda seed: torch.manual_seed(next(seeds)))
    assert compile_baseline.compiled_with_eager_draws(ref, "tf32", args, Tolerance(1e-2, "matmul in reference")) is None


class _NoMemoryInFloat64(_Affine):
    """A reference whose float64 run (the referee's) runs out of GPU memory, as level 2's 2 did."""

    def forward(self, x):
        if x.dtype == torch.float64:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return super().forward(x)


def test_a_miss_the_referee_cannot_judge_stands_against_torch_compile(monkeypatch):
    """As a candidate's does: a referee out of memory beside other workers (RefereeOutOfMemory) was
    counted as a pass, and torch.compile's TF32 stayed the baseline where our TF32 had failed."""
    from stitchcuda.agents.verify import worker

    torch.manual_seed(0)
    ref = _NoMemoryInFloat64().eval()
    tol = Tolerance(1e-2, "matmul in reference")
    ops = Counter({"addmm": 1, "relu": 1})

    def off_when_large(x):
        y = ref(x)
        return y * 1.1 if x.abs().max() > 100 else y

    for beside in (False, True):  # None from the referee, then its RefereeOutOfMemory
        monkeypatch.setattr(worker, "_BESIDE_OTHERS", [beside])
        sets = compile_baseline.checked_inputs(_sets(), lambda: [torch.randn(8, 64)], torch.device("cpu"))
        why = compile_baseline.compile_misses(ref, off_when_large, sets, tol, ops)
        assert why is not None and why.startswith("adversarial-large:"), (beside, why)
        assert "fp64 referee: none" in why, why
