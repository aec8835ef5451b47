"""Recurrent layers (nn.LSTM, nn.GRU, nn.RNN) as one node of the traced graph.

Traced as PyTorch runs them, a recurrent layer is backend-specific (mkldnn_rnn_layer on the CPU,
_cudnn_rnn on CUDA) or, where no fused backend applies, thousands of unrolled cell ops with in-place
gate math. During tracing, `recurrent_as_one_op` routes the layers' `_VF` entry points through one
opaque custom op, `stitchcuda_trace::rnn`, whose node keeps the whole layer stack (mode, sizes,
weights, direction, layout) for the recurrent emitter. Forms it does not describe (packed sequences,
LSTM projections, unbatched input, dropout between layers in training) go to PyTorch's own entry
point unchanged, and trace as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

OP = "stitchcuda_trace.rnn.default"
MODES = ("lstm", "gru", "rnn_tanh", "rnn_relu")
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _original(mode: str) -> Any:
    # The bound C function, not whatever torch._VF shows at the time (the patch below replaces it).
    return getattr(torch._C._VariableFunctions, mode)


@torch.library.custom_op("stitchcuda_trace::rnn", mutates_args=())
def rnn(mode: str, input: torch.Tensor, hx: torch.Tensor, cx: torch.Tensor | None, params: list[torch.Tensor],
        has_biases: bool, num_layers: int, dropout: float, train: bool, bidirectional: bool,
        batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    state = (hx, cx) if mode == "lstm" else hx
    out = _original(mode)(input, state, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    c_n = out[2] if mode == "lstm" else hx.new_empty(0)
    return out[0].clone(), out[1].clone(), c_n.clone()


@rnn.register_fake
def _(mode, input, hx, cx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    directions = 2 if bidirectional else 1
    hidden = hx.shape[-1]
    out_shape = (*input.shape[:2], directions * hidden)
    return input.new_empty(out_shape), hx.new_empty(hx.shape), (
        cx.new_empty(cx.shape) if mode == "lstm" and cx is not None else hx.new_empty(0))


def describes(mode: str, input: Any, state: Any, params: Sequence[Any], has_biases: bool, num_layers: int,
              dropout: float, train: bool, bidirectional: bool) -> bool:
    """Whether the call is a form the one op describes (see the module's docstring)."""
    if not isinstance(input, torch.Tensor) or input.dim() != 3:
        return False
    states = state if mode == "lstm" else (state,)
    if mode == "lstm" and (not isinstance(state, tuple | list) or len(state) != 2):
        return False
    if not all(isinstance(s, torch.Tensor) and s.dim() == 3 for s in states):
        return False
    per = 4 if has_biases else 2
    directions = 2 if bidirectional else 1
    if len(params) != per * num_layers * directions:
        return False  # LSTM with projections (w_hr) among others
    hidden = states[0].shape[-1]
    if mode == "lstm" and states[1].shape[-1] != hidden:
        return False
    return not (train and dropout > 0 and num_layers > 1)


def _patched(mode: str) -> Any:
    original = _original(mode)

    def call(*args: Any) -> Any:
        # The unpacked form: (input, hx, params, has_biases, num_layers, dropout, train,
        # bidirectional, batch_first); the packed one has the batch sizes second.
        if not getattr(_tracing, "depth", 0) or len(args) != 9 or not isinstance(args[2], list | tuple):
            return original(*args)
        input, state, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
        if not describes(mode, input, state, params, has_biases, num_layers, dropout, train, bidirectional):
            return original(*args)
        hx, cx = (state[0], state[1]) if mode == "lstm" else (state, None)
        out, h_n, c_n = rnn(mode, input, hx, cx, list(params), bool(has_biases), int(num_layers), float(dropout),
                            bool(train), bool(bidirectional), bool(batch_first))
        return (out, h_n, c_n) if mode == "lstm" else (out, h_n)

    return call


# torch._VF is the process's: its entry points are patched for a trace's duration (graph.py runs
# one trace at a time), and route through the op only in the tracing thread, so that another
# thread's recurrent layer (a candidate's backward, say) runs as PyTorch's meanwhile.
_tracing = threading.local()


@contextlib.contextmanager
def recurrent_as_one_op() -> Iterator[None]:
    """In this thread, torch._VF's recurrent entry points as calls of the one op, for the trace's duration."""
    vf = torch._VF
    saved = {mode: vf.__dict__.get(mode) for mode in MODES}
    _tracing.depth = getattr(_tracing, "depth", 0) + 1
    try:
        for mode in MODES:
            setattr(vf, mode, _patched(mode))
        yield
    finally:
        _tracing.depth -= 1
        for mode, value in saved.items():
            if value is None:
                vf.__dict__.pop(mode, None)
            else:
                setattr(vf, mode, value)
