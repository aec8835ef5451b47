"""Recurrent layers (issue 17 item 5): nn.LSTM / nn.GRU / nn.RNN trace as one node and the built-in
coder's whole candidate runs them, on the CPU through the kernels' host entries (the same cell
code the GPU runs) and on the GPU through the step kernels."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

from stitchcuda.agents import graph, trace_rnn
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


class Recurrent(nn.Module):
    """One recurrent stack, returning what a module of that kind returns."""

    def __init__(self, kind: str, layers: int, bidirectional: bool, batch_first: bool, bias: bool = True,
                 returns: str = "out"):
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "tanh": nn.RNN, "relu": nn.RNN}[kind]
        extra = {"nonlinearity": kind} if kind in ("tanh", "relu") else {}
        self.rnn = cls(6, 12, layers, bias=bias, batch_first=batch_first, bidirectional=bidirectional, **extra)
        self.kind, self.returns = kind, returns
        self.fc = nn.Linear(12 * (2 if bidirectional else 1), 3)

    def forward(self, x, h0, c0=None):
        out, state = self.rnn(x, (h0, c0) if self.kind == "lstm" else h0)
        if self.returns == "out":
            return out
        if self.returns == "fc_last":
            return self.fc(out[:, -1] if self.rnn.batch_first else out[-1])
        return state[1] if self.kind == "lstm" else state  # the final states


def make(case: tuple) -> Recurrent:
    """The case's module, of a class whose __init__ takes no arguments (as ModelNew's then does)."""

    class Case(Recurrent):
        def __init__(self):
            super().__init__(*case)

    return Case()


CASES = [
    ("lstm", 2, False, True, True, "fc_last"),
    ("lstm", 3, False, True, True, "state"),
    ("gru", 2, False, False, True, "out"),
    ("gru", 2, True, False, True, "out"),
    ("tanh", 1, True, True, False, "state"),
    ("relu", 2, False, False, True, "out"),
]


def _inputs(m: Recurrent, t: int = 7, b: int = 3) -> list[torch.Tensor]:
    d = 2 if m.rnn.bidirectional else 1
    x = torch.randn(b, t, 6) if m.rnn.batch_first else torch.randn(t, b, 6)
    states = [torch.randn(m.rnn.num_layers * d, b, 12)]
    if m.kind == "lstm":
        states.append(torch.randn(m.rnn.num_layers * d, b, 12))
    return [x, *states]


def test_a_recurrent_stack_traces_as_one_node():
    torch.manual_seed(0)
    m = Recurrent("gru", 2, True, False)
    nodes = graph.trace_module(m, _inputs(m))
    ops = [n["op"] for n in nodes if n["op"] not in ("input", "output", "getitem")]
    assert ops == [trace_rnn.OP]
    rnn = next(n for n in nodes if n["op"] == trace_rnn.OP)
    assert rnn["args"]["mode"] == "gru" and rnn["args"]["bidirectional"] is True
    assert len(rnn["args"]["params"]) == 2 * 2 * 4
    assert planner.plan_graph(nodes).supported


def test_forms_the_op_does_not_describe_trace_as_before():
    """A projection (proj_size) is not one of the op's forms: PyTorch's own entry point runs, the
    trace shows its backend's op, and the plan says it is unsupported rather than computing wrongly."""
    m = nn.LSTM(6, 12, 1, proj_size=4)
    nodes = graph.trace_module(m, [torch.randn(5, 2, 6)])
    assert trace_rnn.OP not in {n["op"] for n in nodes}
    assert not planner.plan_graph(nodes).supported


# The Linear after an LSTM is a cuBLAS call, which has no CPU entry: the GPU test covers that case.
CPU_CASES = [c for c in CASES if c[-1] != "fc_last"]


@needs_nvcc
@pytest.mark.parametrize("case", CPU_CASES, ids=["-".join(map(str, c)) for c in CPU_CASES])
def test_candidate_matches_torch_on_the_cpu(case, tmp_path):
    torch.manual_seed(1)
    m = make(case).eval()
    ins = _inputs(m)
    cand = builtin_candidate(m, ins)
    new, _ = load_model_new(cand, m, tmp_path)
    assert "a launch per time step" in cand.files["model_new.py"] or any(
        "a launch per time step" in text for text in cand.files.values())
    for seed in (2, 3):
        torch.manual_seed(seed)
        ins = _inputs(m)
        torch.testing.assert_close(new(*ins), m(*ins), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_candidate_matches_torch_on_the_gpu(case, tmp_path):
    torch.manual_seed(1)
    m = make(case).eval()
    cand = builtin_candidate(m, _inputs(m, t=40, b=5), host=False)
    new, _ = load_model_new(cand, m, tmp_path)
    m, new = m.cuda(), new.cuda()
    with torch.backends.cudnn.flags(allow_tf32=False):
        for seed in (2, 3):
            torch.manual_seed(seed)
            ins = [t.cuda() for t in _inputs(m, t=40, b=5)]
            torch.testing.assert_close(new(*ins), m(*ins), rtol=1e-4, atol=1e-4)


@needs_nvcc
def test_training_and_compile_through_a_recurrent_candidate(tmp_path):
    """Backward is the vjp of the reference math, which calls PyTorch's own recurrent entry point
    (the kept file needs no op of ours); torch.compile(fullgraph=True) takes the candidate's op."""
    torch.manual_seed(4)
    m = make(("gru", 2, True, False, True, "out"))
    ins = _inputs(m)
    new, mod = load_model_new(builtin_candidate(m, ins), m, tmp_path)
    assert "torch.ops.stitchcuda_trace" not in (tmp_path / "model_new.py").read_text()
    xs = [ins[0].clone().requires_grad_() for _ in range(2)]
    new(xs[0], ins[1]).square().sum().backward()
    m(xs[1], ins[1]).square().sum().backward()
    torch.testing.assert_close(xs[0].grad, xs[1].grad, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(new.named_parameters(), m.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    compiled = torch.compile(new, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(*ins), m(*ins), rtol=1e-4, atol=1e-5)


class Wide(nn.Module):
    """Sizes the small cases never reach in the persistent launches: 200 units (25 blocks a direction or
    layer, the last one partial) or 13 (rows not a whole number of float4s), a batch of 20 (the
    products in two chunks of the batch), one gate (tanh and relu RNNs: 64 threads a block)."""

    def __init__(self, kind: str = "lstm", layers: int = 2, bidirectional: bool = True, hidden: int = 200):
        super().__init__()
        self.kind = kind
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "tanh": nn.RNN, "relu": nn.RNN}[kind]
        extra = {"nonlinearity": kind} if kind in ("tanh", "relu") else {}
        self.rnn = cls(32, hidden, layers, batch_first=True, bidirectional=bidirectional, **extra)

    def forward(self, x, h0, c0=None):
        out, state = self.rnn(x, (h0, c0) if self.kind == "lstm" else h0)
        # the output and the final states (every layer's, from the stack's last wave)
        return out, state[0] if self.kind == "lstm" else state


def _wide_inputs(m: Wide) -> list[torch.Tensor]:
    rows = m.rnn.num_layers * (2 if m.rnn.bidirectional else 1)
    hidden = m.rnn.hidden_size
    states = [torch.randn(rows, 20, hidden) for _ in range(2 if m.kind == "lstm" else 1)]
    return [torch.randn(20, 50, 32), *states]


# (kind, layers, bidirectional, hidden, persistent launches on, the kernel expected, its launches a forward)
WIDE = [
    ("lstm", 2, True, 200, True, "recur", 2),  # a launch a layer, both directions in it
    ("gru", 2, True, 200, True, "recur", 2),
    ("relu", 2, True, 13, True, "recur", 2),
    ("lstm", 3, False, 200, True, "recur_stack", 1),  # the whole stack as one wavefront
    ("gru", 3, False, 200, True, "recur_stack", 1),
    ("lstm", 2, False, 13, True, "recur_stack", 1),
    ("tanh", 4, False, 37, True, "recur_stack", 1),
    ("lstm", 2, True, 200, False, "step", 2 * 50),  # the flag off: a launch a time step
    ("gru", 3, False, 200, False, "step", 3 * 50),
]


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind,layers,bidirectional,hidden,persistent,kernel,launches", WIDE,
                         ids=["-".join(map(str, c[:5])) for c in WIDE])
def test_the_persistent_recurrence_on_the_gpu(kind, layers, bidirectional, hidden, persistent, kernel, launches,
                                              monkeypatch, tmp_path):
    """One cooperative launch a layer (`recur`), or for a one-direction stack one for the whole stack
    (`recur_stack`), where the device starts the grid at once; with the flag off, the per-step kernels.
    The profiler sees which ran and how often; either way the results are what torch computes."""
    from stitchcuda.agents.coder import emit_rnn

    if persistent:
        monkeypatch.delenv(emit_rnn.PERSISTENT_ENV, raising=False)
    else:
        monkeypatch.setenv(emit_rnn.PERSISTENT_ENV, "0")
    torch.manual_seed(5)

    class Case(Wide):
        def __init__(self):
            super().__init__(kind, layers, bidirectional, hidden)

    m = Case().eval()
    cand = builtin_candidate(m, _wide_inputs(m), host=False)
    new, _ = load_model_new(cand, m, tmp_path)
    m, new = m.cuda(), new.cuda()
    torch.manual_seed(6)
    ins = [t.cuda() for t in _wide_inputs(m)]
    with torch.no_grad(), torch.backends.cudnn.flags(allow_tf32=False):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = new(*ins)
            torch.cuda.synchronize()
        want = m(*ins)
        for _ in range(4):  # the graph path's calls (eager, then captured and replayed) agree too
            torch.testing.assert_close(new(*ins), want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    counts: dict[str, int] = {}
    for e in prof.key_averages():
        for name in ("recur_stack", "recur", "step"):
            if f"sc_rnn::{name}<" in e.key:
                counts[name] = counts.get(name, 0) + e.count
    assert counts == {kernel: launches}, counts
