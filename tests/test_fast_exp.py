"""exp through the SFU in the pointwise kernels (codegen.FAST_EXP_ENV, on by default; "0" turns it
off): which ops take it, that a file without exp keeps its bytes, that the default kernels stay byte
for byte as recorded (the example's GPU recordings are replayed by the CPU tests, matched by its
kernel's bytes), and that the kernels build for sm_90 without warnings and compute, through the host
entries, what the reference does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new, needs_nvcc
from test_emit_conv import cudnn_include

from stitchcuda.agents.coder import builtin, codegen
from stitchcuda.agents.loop import plan_task
from stitchcuda.agents.verify import replay
from stitchcuda.task import find_task

pytestmark = pytest.mark.usefixtures("isolated_cache")
ROOT = Path(__file__).resolve().parents[1]


class Exps(nn.Module):
    def forward(self, x):
        f = torch.nn.functional
        return torch.sigmoid(x) + f.silu(x) * f.mish(x) - f.softplus(x, beta=2.0) + torch.exp(x * 0.5) + torch.expm1(x)


def _source(monkeypatch, on: bool) -> str:
    if on:
        monkeypatch.delenv(codegen.FAST_EXP_ENV, raising=False)  # the default
    else:
        monkeypatch.setenv(codegen.FAST_EXP_ENV, "0")
    return builtin_candidate(Exps(), [torch.randn(4, 64)]).files["fused_kernels.cu"]


class NoExp(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + x


def test_the_flag_turns_exp_sigmoid_silu_mish_and_softplus_to_the_sfu(monkeypatch):
    off, on = _source(monkeypatch, False), _source(monkeypatch, True)
    assert "__expf" not in off and "sc_exp(" not in off and "sc_sigmoid(" in off
    # The default (Triton-like) pointwise shape divides the sigmoid by __fdividef (fast_div.cuh).
    assert "__expf" in on and "sc_sigmoid_fdiv(" in on and "sc_sigmoid(v" not in on
    # Every exp of the chain but expm1's (a cancellation near 0, where __expf's error would show).
    body = on.split("stitch_pw0_math", 1)[1]
    assert body.count("sc_exp(") == 4 and "expm1f(" in body and " expf(" not in body


def test_a_file_without_exp_has_no_fast_math(monkeypatch):
    """fast_math.cuh joins a file only where a kernel calls it: other kernels keep their bytes (and
    their recorded GPU runs)."""
    monkeypatch.delenv(codegen.FAST_EXP_ENV, raising=False)
    plain = builtin_candidate(NoExp(), [torch.randn(4, 64)]).files["fused_kernels.cu"]
    assert "sc_exp" not in plain and "sc_sigmoid_fast" not in plain
    monkeypatch.setenv(codegen.FAST_EXP_ENV, "0")
    assert builtin_candidate(NoExp(), [torch.randn(4, 64)]).files["fused_kernels.cu"] == plain
    assert "SC_INLINE float sc_exp" in _source(monkeypatch, True)


def test_the_examples_kernels_stay_as_recorded():
    """The default coder writes the example's kernel byte for byte as the recorded GPU run has it:
    the editor and CLI tests replay that run, and a change to any kernel the example uses (the
    prelude included) must come with a new recording from a GPU."""
    task = find_task(ROOT / "examples" / "gated_block.py")
    cand = builtin.code(task, plan_task(task))
    recording = replay.load(ROOT / "bench" / "results" / "2026-12-04-h200-example-gated_block-d5354d9.json")
    assert replay.find(recording, cand)[1] in ("files", "kernels")


@needs_nvcc
def test_fast_exp_kernels_match_the_reference_and_build_for_sm90(monkeypatch, tmp_path):
    monkeypatch.delenv(codegen.FAST_EXP_ENV, raising=False)
    module, x = Exps(), torch.randn(4, 64) * 4.0
    cand = builtin_candidate(module, [x])
    new, _ = load_model_new(cand, module, tmp_path)
    torch.testing.assert_close(new(x), module(x), rtol=1e-5, atol=1e-5)
    include = cudnn_include()
    if include is None:
        pytest.skip("no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE)")
    assert_builds_clean_for_sm90(cand, tmp_path / "k.cu", include)
