"""call_state.py: a forward that keeps a count from call to call is a finding (`call-count`): it can
do the work for as many calls as any check makes and stop after. One such time bomb runs through the
real Verifier, where every check it reaches passes."""

from __future__ import annotations

import pytest
from conftest import hack_candidate, hack_task, static_codes

from stitchcuda.agents.verify.static_check import check_candidate_sources
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

_MODULE = '''import itertools, torch, torch.nn as nn
{top}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.seen = []
        self._buf = None
        self._ticks = itertools.count()
    def forward(self, x):
{body}
        return self.helper(x)
    def helper(self, x):
{helper}
        return x
'''


def _codes(body: str = "        pass", helper: str = "        pass", top: str = "") -> list[str]:
    src = _MODULE.format(top=top, body=body, helper=helper)
    return [f.message for f in check_candidate_sources({"model_new.py": src}, "model_new.py")
            if f.code == "call-count"]


@pytest.mark.parametrize(("top", "body", "helper"), [
    ("", "        self.calls += 1", "        pass"),
    ("", "        pass", "        self.calls = self.calls + 1"),  # in a method forward calls
    ("_N = [0]", "        _N[0] += 1", "        pass"),
    ("_N = 0", "        global _N\n        _N += 1", "        pass"),
    ("", "        self.seen.append(1)", "        pass"),
    ("", "        next(self._ticks)", "        pass"),
    ("_STATE = {}", "        _STATE['n'] = _STATE.get('n', 0) + 1", "        pass"),
])
def test_a_count_kept_in_forward_is_found(top, body, helper):
    assert _codes(body, helper, top), (top, body, helper)


@pytest.mark.parametrize("body", [
    "        n = 0\n        n += 1",  # a local
    "        if self._buf is None or self._buf.shape != x.shape:\n            self._buf = torch.empty_like(x)",
    "        parts = []\n        parts.append(x)",
    # a workspace cache keyed by shape; a ping-pong index; a saturating warm-up; a registered buffer
    "        self._buf = {}\n        w = self._buf.setdefault(tuple(x.shape), 0)",
    "        self.calls = 1 - self.calls\n        w = self.seen[self.calls]",
    "        self.calls = min(self.calls + 1, 3)\n        w = self.seen[self.calls]",
    # in the state_dict: compared with the reference's own after each call (BatchNorm's)
    "        self.register_buffer('num_batches_tracked', torch.zeros((), dtype=torch.long))\n"
    "        self.num_batches_tracked += 1",
])
def test_what_holds_no_count_passes(body):
    assert _codes(body) == []


@pytest.mark.parametrize("body", [
    # a warm-up before capturing a graph, as the generated fast path arms on its second call
    "        self.calls += 1\n        if self.calls == 3:\n            self._buf = torch.empty_like(x)",
    # a ping-pong index over two output buffers
    "        self.calls = (self.calls + 1) % 2\n        self.seen = [x][self.calls - 1:]",
])
def test_a_count_that_stays_small_passes(body):
    assert _codes(body) == [], body


@pytest.mark.parametrize(("top", "fuse"), [("WARMUP = 3", False), ("WARMUP = 3000", True),
                                            ("WARMUP = 3\nWARMUP = 5000", True),
                                            ("WARMUP = 3\nsetattr(ModelNew, 'WARMUP', 9000)", True),
                                            ("WARMUP = 3\nsetattr(ModelNew, 'WAR' + 'MUP', 9000)", True)])
def test_a_warm_up_read_against_a_named_constant(top, fuse):
    """`if self.calls < WARMUP` (an LLM candidate's warm-up before a CUDA graph, flagged before): a
    name bound once to a small constant is one; a large one, or one bound again, is not."""
    body = "        self.calls += 1\n        if self.calls < WARMUP:\n            self._buf = torch.empty_like(x)"
    assert bool(_codes(body, top=top)) == fuse


@pytest.mark.parametrize("body", [
    "        self.calls += 1\n        if self.calls > 1000:\n            x = x * 0",  # past every check
    "        self.calls = (self.calls + 1) % 100000\n        if self.calls == 99999:\n            x = x * 0",
    "        self.calls += 1\n        if self.calls == 3:\n            x = x * 0\n        x = x * (self.calls < 5000)",
    "        self.calls += 1\n        if getattr(self, 'cal' + 'ls') > 10**6:\n            x = x * 0",
    # a review's routes (2026-12-05): the class's count, and a fractional step read against a small constant
    "        ModelNew.calls += 1\n        if ModelNew.calls > 1000:\n            x = x * 0",
    "        type(self).calls += 1",
    "        self.calls += 0.01\n        if self.calls > 10:\n            x = x * 0",
    # a buffer in no state_dict: nothing compares it with the reference's
    "        self.register_buffer('ticks', torch.zeros(()), persistent=False)\n        self.ticks += 1",
])
def test_a_fuse_dressed_as_a_warm_up_is_found(body):
    assert _codes(body), body


def test_counts_outside_forward_pass():
    """__init__'s and a training setter's bookkeeping is not forward's (the generated module counts
    mode changes in its `training` setter)."""
    top = "_MODE = [0]\ndef _set(m):\n    _MODE[0] += 1\n"
    assert _codes(top=top) == []


def test_a_time_bomb_is_rejected_though_every_check_passes(tmp_path, build_cache):
    opts = VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False)
    v = verify(hack_task("ref_affine"), hack_candidate("hack_call_count_bomb"), tmp_path / "v", opts)
    assert not v.accepted and v.status == "hacked", (v.status, v.message)
    assert static_codes(v) == {"call-count"}, v.hack_findings
    assert v.checks and all(c["ok"] for c in v.checks), v.checks
