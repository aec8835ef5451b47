"""Hostile candidates the Verifier still accepts, kept where the next fix can be tested against them.

Each is a strict xfail: it asserts the candidate is rejected, fails today, and turns the suite red
the day a change rejects it, so its mark is taken off then and the hole leaves this file (the
rank-1 matmul behind a test that its inputs look iid left for test_hacks.py on 2026-12-03, caught
by the coupled set). They came from a red-team review on the CPU (2026-12-02); the closing note of
that session says why each passes and what might close it.
"""

from __future__ import annotations

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify.verifier import VerifyOptions, verify


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="open: nn.RNN's initial weights forget the skipped steps; no check changes them so")
def test_a_recurrence_over_its_last_steps_only_is_rejected(tmp_path, build_cache):
    """h_n of a 2-layer tanh RNN from the last 32 of 512 steps: at init the recurrence contracts and
    forgets the rest to ~1e-8, whatever the inputs; the weights-changed check keeps it contractive."""
    v = verify(hack_task("ref_rnn_hn"), hack_candidate("open_rnn_truncated", kernels="kernels_open.cpp"),
               tmp_path / "v", VerifyOptions(cpu_only=True, timeout_s=300.0, time_compile=False,
                                             extra_env={"STITCHCUDA_CACHE": str(build_cache)}))
    assert not v.accepted, (v.status, v.message)
