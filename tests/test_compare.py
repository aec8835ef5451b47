"""Output comparison and tolerances: what passes, what fails, and that the message says why."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from stitchcuda.agents.verify import compare
from stitchcuda.agents.verify.compare import compare_outputs, tolerance_for
from stitchcuda.agents.verify.dynamic_check import bits_equal, output_stats, stats_match

FP32 = [torch.float32]


@pytest.mark.parametrize(
    ("ops", "dtypes", "rtol"),
    [
        (["mul", "add", "relu"], FP32, 1e-4),
        (["sum", "div"], FP32, 1e-3),
        (["_softmax"], FP32, 1e-3),
        (["addmm", "relu"], FP32, 1e-2),
        (["convolution"], FP32, 1e-2),
        (["add"], [torch.float16], 1e-2),
        (["add"], [torch.bfloat16], 2e-2),
        (["addmm"], [torch.bfloat16], 2e-2),
    ],
)
def test_tolerance_follows_the_reference_ops_and_dtypes(ops, dtypes, rtol):
    tol = tolerance_for(ops, dtypes)
    assert tol.rtol == rtol and tol.why


@pytest.mark.parametrize("build", [
    lambda: torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True),
    lambda: torch.nn.MultiheadAttention(64, 4, batch_first=True),
], ids=["encoder_layer", "multihead_attention"])
def test_fused_eval_fast_paths_are_held_to_the_product_tolerance(build):
    # In eval mode without grad these modules run one fused op, whose products the op recorder
    # cannot see: judged as pointwise work (1e-4), a TF32 candidate failed (bench/networks'
    # transformer_encoder_layer with --mode eval, H200, 616ee90).
    from stitchcuda.agents.verify.dynamic_check import trace_ops

    m = build().eval()
    x = torch.randn(2, 8, 64)
    with torch.no_grad():
        _, ops, _ = trace_ops(lambda: m(x) if isinstance(m, torch.nn.TransformerEncoderLayer) else m(x, x, x))
    assert set(ops) <= {"_transformer_encoder_layer_fwd", "_native_multi_head_attention"}  # the fused op alone
    assert tolerance_for(ops, FP32).rtol == 1e-2


def _x(seed: int = 0, shape=(64, 33)) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(shape)


POINTWISE = tolerance_for(["mul"], FP32)


def test_identical_and_rounding_level_differences_pass():
    r = _x()
    assert compare_outputs([r], [r.clone()], POINTWISE).ok
    m = compare_outputs([r], [r * (1 + 1e-6)], POINTWISE)
    assert m.ok and 0 < m.max_abs < 1e-5


def test_tanh_gelu_passes_kernelbench_but_not_fp32_pointwise():
    x = _x()
    exact, approx = F.gelu(x), F.gelu(x, approximate="tanh")
    assert torch.allclose(approx, exact, atol=1e-2, rtol=1e-2)  # KernelBench's check
    m = compare_outputs([exact], [approx], tolerance_for(["gelu"], FP32))
    assert not m.ok and "beyond tolerance (rtol 0.0001)" in m.message


def test_skipping_a_small_term_is_caught():
    x, y = _x(1), _x(2)
    ref = torch.relu(x * 2.5 + y) + 1e-3 * x
    m = compare_outputs([ref], [torch.relu(x * 2.5 + y)], POINTWISE)
    assert not m.ok and m.bad_fraction > 0.5


def test_fp16_compute_fails_an_fp32_reference():
    x, y = _x(1), _x(2)
    ref = x * 1.7 + y
    half = (x.half() * 1.7 + y.half()).float()
    assert not compare_outputs([ref], [half], POINTWISE).ok


def test_unwritten_elements_are_reported_as_nan():
    r = _x()
    g = r.clone()
    g[3, 5:9] = float("nan")  # what the poisoned allocation leaves where the kernel never wrote
    m = compare_outputs([r], [g], POINTWISE)
    assert (
        not m.ok
        and m.message == "output 0: 4 elements NaN where the reference is finite (unwritten or wrong)"
    )


def test_nan_where_the_reference_has_nan_passes_and_the_reverse_fails():
    r = _x()
    r[0, 0] = float("nan")
    assert compare_outputs([r], [r.clone()], POINTWISE).ok
    g = r.clone()
    g[0, 0] = 1.0
    assert "finite where the reference is NaN" in compare_outputs([r], [g], POINTWISE).message


def test_infinities_must_match_in_place_and_sign():
    r = _x()
    r[1, 1] = float("inf")
    g = r.clone()
    assert compare_outputs([r], [g], POINTWISE).ok
    g[1, 1] = -float("inf")
    assert compare_outputs([r], [g], POINTWISE).message == "output 0: infinities differ from the reference"


@pytest.mark.parametrize(
    ("got", "message"),
    [
        ([torch.zeros(2, 3)], "output 0 has shape (2, 3), reference (2, 4)"),
        (
            [torch.zeros(2, 4, dtype=torch.float64)],
            "output 0 has dtype torch.float64, reference torch.float32",
        ),
        ([torch.zeros(2, 4), torch.zeros(1)], "returned 2 outputs, reference returns 1"),
        ([3.0], "output 0 is float, reference gives a tensor"),
    ],
)
def test_structural_mismatches(got, message):
    m = compare_outputs([torch.zeros(2, 4)], got, POINTWISE)
    assert not m.ok and m.message == message


def test_integer_and_python_outputs_compare_exactly():
    idx = torch.arange(10)
    assert compare_outputs([idx, 7], [idx.clone(), 7], POINTWISE).ok
    off = idx.clone()
    off[4] += 1
    assert compare_outputs([idx], [off], POINTWISE).message == "output 0: 1 of 10 integer elements differ"
    assert compare_outputs([idx, 7], [idx, 8], POINTWISE).message == "output 1: 8 != reference 7"


def test_complex_outputs_compare_both_parts():
    r = torch.complex(_x(1), _x(2))
    assert compare_outputs([r], [r.clone()], POINTWISE).ok
    assert not compare_outputs([r], [torch.complex(r.real, -r.imag)], POINTWISE).ok


def test_tensor_where_the_reference_returns_a_number():
    m = compare_outputs([2.0], [torch.tensor([2.0, 2.0])], POINTWISE)
    assert not m.ok and m.message.startswith("output 0: tensor(")


def test_relative_l2_error_alone_can_fail():
    # Every element within atol + rtol*|r| (0.02 here) but all off the same way: the relative L2
    # criterion still fails it.
    r = torch.ones(1000)
    tol = compare.Tolerance(1e-2, "test")
    m = compare_outputs([r], [r + 0.011], tol)
    assert not m.ok and m.message.startswith("output 0: 0 of 1000 elements beyond tolerance")
    assert compare_outputs([r], [r + 0.009], tol).ok


def test_chunked_comparison_matches_the_single_pass(monkeypatch):
    r = _x(shape=(1000,))
    g = r.clone()
    g[777] += 1.0
    whole = compare_outputs([r], [g], POINTWISE)
    monkeypatch.setattr(compare, "_CHUNK", 64)
    chunked = compare_outputs([r], [g], POINTWISE)
    assert not whole.ok and not chunked.ok
    assert chunked.message == whole.message
    assert math.isclose(chunked.rel_norm, whole.rel_norm, rel_tol=1e-9)


def test_atol_scales_with_the_reference_magnitude():
    # Tiny outputs (adversarial "tiny" inputs) are held to the same relative standard as large ones.
    r = _x() * 1e-4
    assert compare_outputs([r], [r * (1 + 1e-6)], POINTWISE).ok
    assert not compare_outputs([r], [r + 1e-6], POINTWISE).ok


# --- the cheap per-trial check used while timing -------------------------------------------------


def test_output_stats_never_reject_what_the_full_comparison_accepts():
    torch.manual_seed(3)
    r = torch.randn(4096)
    tol = 1e-4
    atol = tol * r.abs().mean()
    # The worst output the elementwise rule still accepts: every element off by its full allowance.
    worst = r + (atol + tol * r.abs()) * 0.999
    assert bool(((worst - r).abs() <= atol + tol * r.abs()).all())
    assert stats_match(output_stats([worst]), output_stats([r]), tol)


def test_output_stats_catch_stale_and_garbage_outputs():
    a, b = _x(1), _x(2)
    ref = output_stats([a])
    assert stats_match(output_stats([a.clone()]), ref, 1e-4)
    assert not stats_match(output_stats([b]), ref, 1e-2)  # another input set's answer
    assert not stats_match(output_stats([torch.full_like(a, float("nan"))]), ref, 1e-2)
    assert not stats_match(output_stats([torch.zeros_like(a)]), ref, 1e-2)
    assert stats_match(output_stats([torch.arange(5), 2]), output_stats([torch.arange(5), 2]), 1e-4)
    assert not stats_match(output_stats([torch.arange(5)]), output_stats([torch.arange(1, 6)]), 1e-4)


def test_bits_equal_treats_nan_as_a_value_and_needs_no_copy():
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert bits_equal(a, a.clone())
    assert not bits_equal(a, torch.tensor([1.0, float("nan"), 0.0]))  # -0.0 vs 0.0: a different write
    t = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous
    assert bits_equal(t, t.clone()) and not bits_equal(t, t.contiguous().view(3, 4))
    assert bits_equal(torch.tensor([True, False]), torch.tensor([True, False]))
    assert bits_equal(torch.ones(2, dtype=torch.complex64), torch.ones(2, dtype=torch.complex64))


def test_strict_products_are_held_to_1e4_unless_the_reference_runs_them_on_tf32():
    """Under `strict` an fp32 product gets no TF32 room (compare.STRICT_PRODUCT_RTOL), except where
    the reference itself runs that op on TF32 (cuDNN's convolutions under PyTorch's default
    switches on a GPU): an exact candidate is TF32's error away from it there."""
    from stitchcuda.agents.verify import precision, worker

    fp32 = [torch.float32]
    assert tolerance_for(["mm"], fp32, "strict").rtol == 1e-4
    assert tolerance_for(["mm"], fp32, "tf32").rtol == 1e-2
    cudnn = precision.CUDNN_SENSITIVE
    assert tolerance_for(["convolution"], fp32, "strict", reference_tf32=cudnn).rtol == 1e-2
    assert tolerance_for(["convolution"], fp32, "strict").rtol == 1e-4
    assert tolerance_for(["mm"], fp32, "strict", reference_tf32=cudnn).rtol == 1e-4
    flags = {"cudnn.allow_tf32": True, "cuda.matmul.allow_tf32": False}
    assert worker._reference_tf32(flags, torch.device("cpu")) == set()
    assert worker._reference_tf32(flags, torch.device("cuda", 0)) == cudnn


def test_a_tolerance_crosses_processes_with_its_l2_budget():
    """The compile baseline's worker gets the candidate's class as to_dict wrote it: a reduction's
    REDUCTION_L2 survives the trip (dropped, torch.compile would have been judged at rtol's 1e-3)."""
    from stitchcuda.agents.verify.compare import REDUCTION_L2, Tolerance, tolerance_for

    for ops in (["sum"], ["mm"], ["relu"]):
        tol = tolerance_for(ops, [torch.float32])
        assert Tolerance.from_dict(tol.to_dict()) == tol
    assert tolerance_for(["cumsum"], [torch.float32]).l2_limit == REDUCTION_L2
