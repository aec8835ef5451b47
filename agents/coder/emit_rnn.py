"""Recurrent layer stacks: the one `stitchcuda_trace::rnn` node (agents/trace_rnn.py) of an nn.LSTM,
nn.GRU or nn.RNN, as one launcher running every layer and direction (cuda/rnn.cuh).

Sizes, layout (batch_first), bias and direction count are compile-time constants of the traits
struct; the state between steps and the layers' outputs live in scratch buffers. A launch a time
step cost ~13.6 us a step on an H200 (level 3's LSTM: 41.8 ms for 3,072 steps). Where the device
starts the whole grid at once (a cooperative launch), a one-direction stack of several layers runs as
one launch, a wavefront over the layers (T + L - 1 steps instead of L * T), and any other stack as
one launch a layer; else a launch a step. fp32 only, with fp32 FMA arithmetic throughout (no TF32:
the recurrence compounds rounding over the time steps).
"""

from __future__ import annotations

import os

from stitchcuda.agents import trace_rnn
from stitchcuda.agents.coder import cuda_text
from stitchcuda.agents.coder.codegen import KernelArg
from stitchcuda.agents.coder.kernels import EmitContext, Kernel, NotSupported, Operand, launchers

_HEADER = cuda_text.load("rnn.cuh")
MODES = {"lstm": "sc_rnn::LSTM", "gru": "sc_rnn::GRU", "rnn_tanh": "sc_rnn::TANH", "rnn_relu": "sc_rnn::RELU"}
UNITS = 8  # hidden units per block of the step kernel: G * 8 gate rows over its 8 warps
STATIC_SMEM = 48 * 1024  # the step kernel's shared memory (h of every batch row) stays below the default limit
# "0": every time step is a launch of its own (cuda/rnn.cuh's `step`), never a persistent launch;
# "layer": a persistent launch a layer (`recur`), never the whole stack's wavefront (`recur_stack`).
PERSISTENT_ENV = "STITCHCUDA_RNN_PERSISTENT"


def _f32(value: object, what: str) -> Operand:
    if not isinstance(value, Operand):
        raise NotSupported(f"{what} is not a tensor")
    if value.dtype != "float32":
        raise NotSupported(f"recurrent layers in {value.dtype}: fp32 only so far")
    if not value.contiguous:
        raise NotSupported(f"{what} is not contiguous")
    return value


def emit_rnn(ctx: EmitContext) -> Kernel:
    a = ctx.args
    mode = a.get("mode")
    if mode not in MODES:
        raise NotSupported(f"recurrent mode {mode!r}")
    if a.get("train") and a.get("dropout", 0.0) > 0 and a.get("num_layers", 1) > 1:
        raise NotSupported("dropout between recurrent layers in training mode")
    x = _f32(a.get("input"), "the input")
    hx = _f32(a.get("hx"), "h0")
    cx = _f32(a.get("cx"), "c0") if mode == "lstm" else None
    params = [_f32(p, f"weight {i}") for i, p in enumerate(a.get("params") or [])]
    layers, directions = int(a["num_layers"]), 2 if a.get("bidirectional") else 1
    bias, batch_first = bool(a.get("has_biases")), bool(a.get("batch_first"))
    gates = trace_rnn.GATES[mode]
    if len(x.shape) != 3 or len(hx.shape) != 3:
        raise NotSupported("unbatched recurrent input")
    t, b = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    feat, hidden = x.shape[2], hx.shape[2]
    if tuple(hx.shape) != (layers * directions, b, hidden) or (cx is not None and cx.shape != hx.shape):
        raise NotSupported(f"initial state {list(hx.shape)} for {layers} layer(s) x {directions} direction(s)")
    per = 4 if bias else 2
    if len(params) != per * layers * directions:
        raise NotSupported(f"{len(params)} weights for {layers} layer(s) x {directions} direction(s)")
    for layer in range(layers):
        k = feat if layer == 0 else directions * hidden
        for d in range(directions):
            base = (layer * directions + d) * per
            want = [(gates * hidden, k), (gates * hidden, hidden)] + [(gates * hidden,)] * (per - 2)
            got = [tuple(p.shape) for p in params[base:base + per]]
            if got != want:
                raise NotSupported(f"layer {layer} direction {d}: weights {got}, expected {want}")
    if min(t, b, feat, hidden) < 1:
        raise NotSupported("empty recurrent input")
    if 4 * (b * hidden + b * gates * UNITS) > STATIC_SMEM:
        raise NotSupported(f"batch {b} x hidden {hidden}: the step kernel's state does not fit shared memory")
    if t * b > 65535 * 64:
        raise NotSupported(f"{t * b} time-step rows: the projection grid is too tall")

    names: list[str] = []
    for op in (x, hx, cx, *params):
        if op is not None and op.name not in names:
            names.append(op.name)
    slot = {n: i for i, n in enumerate(names)}
    outs = ctx.outputs + [None] * (3 - len(ctx.outputs))
    live = [(i, o) for i, o in enumerate(outs[:3]) if o is not None and not (i == 2 and mode != "lstm")]
    if not live:
        raise NotSupported("no result of the recurrent layers is used")
    for _, o in live:
        if o.dtype != "float32":
            raise NotSupported(f"result {o.name} in {o.dtype}")
    out_slot = {i: f"out{j}" for j, (i, _) in enumerate(live)}

    state = b * hidden
    scratch: list[tuple[str, int]] = [("float32", directions * t * b * gates * hidden),
                                      ("float32", 2 * directions * state)]
    names_s = ["gi", "h"]
    if mode == "lstm":
        scratch.append(("float32", 2 * directions * state))
        names_s.append("c")
    choice = os.environ.get(PERSISTENT_ENV)
    persist = choice != "0"
    # (the stack's kernel takes four pointers a layer as parameters: 64 layers stay far below the limit)
    stack = persist and choice != "layer" and directions == 1 and 1 < layers <= 64
    # The persistent launches' arrival counters (as unsigned): one a direction, or one a layer for the
    # whole stack's wavefront, whose layers' latest hidden states take a buffer of their own.
    scratch.append(("float32", max(directions, layers)))
    names_s.append("arrived")
    if stack:
        scratch.append(("float32", 2 * layers * state))
        names_s.append("wave")
    if layers > 1:
        scratch += [("float32", t * b * directions * hidden)] * 2
        names_s += ["layer0", "layer1"]
    if 0 not in out_slot:
        scratch.append(("float32", t * b * directions * hidden))
        names_s.append("out")
    sidx = {n: f"scratch{i}" for i, n in enumerate(names_s)}

    name = ctx.name
    traits = f"""// {name}: {mode} x{layers} layer(s), {directions} direction(s), T={t} B={b} I={feat} H={hidden}
struct {name}_tr {{
  static constexpr int MODE = {MODES[mode]}, G = {gates}, L = {layers}, D = {directions};
  static constexpr int T = {t}, B = {b}, I = {feat}, H = {hidden}, U = {UNITS};
  static constexpr bool BIAS = {str(bias).lower()}, BATCH_FIRST = {str(batch_first).lower()}, PERSIST = {str(persist).lower()};
  static constexpr bool WAVEFRONT = {str(stack).lower()};
  struct Args {{
    const float* x;
    const float* hx;
    const float* cx;
    const float* w[{len(params)}];
    float* out;
    float* hn;
    float* cn;
    float* gi;
    float* layer[2];
    float* h;
    float* c;
    unsigned* arrived;
    float* wave;
  }};
}};
"""

    def ptr(src: str | None, const: bool = False) -> str:
        if src is None:
            return "nullptr"
        return f"static_cast<{'const ' if const else ''}float*>({src})"

    raw = ([f"const void* in{i}" for i in range(len(names))] + [f"void* out{j}" for j in range(len(live))]
           + [f"void* scratch{i}" for i in range(len(names_s))])
    weights = ", ".join(ptr(f"in{slot[p.name]}", True) for p in params)
    fields = [
        ptr(f"in{slot[x.name]}", True), ptr(f"in{slot[hx.name]}", True),
        ptr(f"in{slot[cx.name]}", True) if cx is not None else "nullptr",
        f"{{{weights}}}",
        ptr(out_slot.get(0) or sidx["out"]), ptr(out_slot.get(1)), ptr(out_slot.get(2)),
        ptr(sidx["gi"]),
        f"{{{ptr(sidx.get('layer0'))}, {ptr(sidx.get('layer1'))}}}",
        ptr(sidx["h"]), ptr(sidx.get("c")), f"static_cast<unsigned*>({sidx['arrived']})", ptr(sidx.get("wave")),
    ]
    casts = [f"  const {name}_tr::Args args{{{', '.join(fields)}}};"]
    device = f"  const int rc = sc_rnn::launch<{name}_tr>(args, stream);\n  if (rc != 0) return rc;"
    host = f"  sc_rnn::host<{name}_tr>(args);"
    how = "a launch per time step"
    if persist:
        how = ("one persistent launch per layer where the device starts its whole grid at once, else " + how)
        if stack:
            how = "the whole stack as one persistent wavefront over the layers, or " + how
    note = f"{mode} {layers} layer(s) x {directions} direction(s), T={t} B={b} I={feat} H={hidden} (fp32 FMA; {how})"
    return Kernel(
        name=name,
        inputs=[KernelArg(n, "float32") for n in names],
        outputs=[KernelArg(o.name, o.dtype) for _, o in live],
        source=f"{_HEADER}\n{traits}\n{launchers(name, raw, casts, device, host)}",
        ops=[note],
        host=True,
        scratch=scratch,
    )


EMITTERS = {trace_rnn.OP: emit_rnn}
