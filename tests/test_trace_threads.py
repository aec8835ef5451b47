"""Traces in several threads of one process (the language server's, a bench's pool): the settings a
trace changes belong to the process, and must come back however the traces' exits interleave.
CI (2026-11-30) lost two of them that way: torch._VF's recurrent entry points stayed patched, and a
later candidate's backward through nn.GRU hit the trace's op."""

from __future__ import annotations

import logging
import threading

import torch
import torch.nn as nn
from torch.distributions import Distribution

from stitchcuda.agents import graph, trace_rnn


def _settings() -> dict[str, object]:
    return {
        "validate_args": Distribution._validate_args,
        "cudnn": torch.backends.cudnn.enabled,
        "flash": torch.backends.cuda.flash_sdp_enabled(),
        "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
        "vf_patched": sorted(m for m in trace_rnn.MODES if m in torch._VF.__dict__),
        "fake_log": logging.getLogger("torch._subclasses.fake_tensor").level,
    }


def _holder(cm: object, entered: threading.Event, leave: threading.Event) -> threading.Thread:
    def hold() -> None:
        with cm:  # type: ignore[attr-defined]
            entered.set()
            leave.wait(30)

    return threading.Thread(target=hold)


def _enter_in_thread(cm: object, entered: threading.Event, leave: threading.Event) -> threading.Thread:
    t = _holder(cm, entered, leave)
    t.start()
    assert entered.wait(30)
    return t


def test_one_trace_at_a_time() -> None:
    """A second thread waits for the first trace's settings to be put back before it changes them:
    saving and restoring them can then not interleave."""
    before = _settings()
    entered, leave = threading.Event(), threading.Event()
    first = _enter_in_thread(graph._one_trace_at_a_time(), entered, leave)
    during = _settings()
    assert during["validate_args"] is False and during["cudnn"] is False and during["flash"] is False
    assert during["vf_patched"] == sorted(trace_rnn.MODES)
    second_in, second_leave = threading.Event(), threading.Event()
    second = _holder(graph._one_trace_at_a_time(), second_in, second_leave)
    second.start()
    assert not second_in.wait(0.5)  # held off while the first is in
    leave.set()
    first.join(30)
    assert second_in.wait(30)
    assert _settings() == during
    second_leave.set()
    second.join(30)
    assert _settings() == before


def _gru_grad(layer: nn.GRU, x: torch.Tensor) -> torch.Tensor:
    x = x.clone().requires_grad_()
    layer(x)[0].square().sum().backward()
    assert x.grad is not None
    return x.grad


def test_another_threads_recurrent_layer_runs_as_pytorch_while_one_traces() -> None:
    """Routing through the trace's op is the tracing thread's alone: a backward elsewhere works."""
    torch.manual_seed(0)
    layer = nn.GRU(6, 5, num_layers=2, batch_first=True)
    x = torch.randn(3, 4, 6)
    want = _gru_grad(layer, x)
    entered, leave = threading.Event(), threading.Event()
    t = _enter_in_thread(trace_rnn.recurrent_as_one_op(), entered, leave)
    try:
        assert "gru" in torch._VF.__dict__  # patched for the process ...
        torch.testing.assert_close(_gru_grad(layer, x), want)  # ... and PyTorch's own here
    finally:
        leave.set()
        t.join(30)
    assert "gru" not in torch._VF.__dict__


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(6, 5, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0].relu()


def test_real_traces_in_several_threads() -> None:
    """Each thread's trace has its one recurrent node; afterwards nothing of the trace is left."""
    before = _settings()
    found: list[list[str]] = []
    errors: list[BaseException] = []

    def trace() -> None:
        try:
            nodes = graph.trace_module(_Recurrent(), [torch.randn(2, 7, 6)])
            found.append([n["op"] for n in nodes if n["op"] not in ("input", "output", "getitem")])
        except BaseException as e:  # noqa: BLE001 (reported below, from the main thread)
            errors.append(e)

    threads = [threading.Thread(target=trace) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(found) == 4 and all(ops.count(trace_rnn.OP) == 1 for ops in found), found
    assert _settings() == before
