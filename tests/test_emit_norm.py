"""Norm emitters: generated kernels against PyTorch, on the CPU through their host entries (all
cases in one nvcc build) and, where a GPU is present, through the real launchers.

Every case traces a module that calls the aten op, emits its kernel, runs it on NaN-poisoned
outputs and scratch, and compares every result the graph reads (and every running statistic the
kernel updates in place) with PyTorch's."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from conftest import Fn, needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import codegen, emit_norm, kernels

A = torch.ops.aten


pytestmark = pytest.mark.usefixtures("isolated_cache")


@dataclass
class Case:
    id: str
    op: str  # the aten op the trace holds
    fn: Callable  # (*tensors) -> the op's results
    shapes: list[tuple[int, ...]]  # input, then weight/bias/running statistics as fn takes them
    dtypes: list[torch.dtype] = field(default_factory=list)  # per tensor (default fp32)
    mean: float = 0.0  # added to the input: large means with small spreads are the hard case
    scale: float = 3.0
    only_out: bool = False  # the graph reads only the normalised output
    path: str = ""  # kernel shape the emitter must pick ("fused", "split", "column", "eval")
    tol: float = 1e-4
    mutates: bool = False  # the kernel updates the running statistics in place
    # The input stored channels-last (N, spatial..., C), as planner.channels_last_convs leaves a
    # convolution's result, and so the normalised output; fn still takes and returns NCHW.
    channels_last: bool = False
    env: dict[str, str] = field(default_factory=dict)  # set while the kernel is emitted


    def inputs(self, seed: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        out = []
        for i, shape in enumerate(self.shapes):
            dtype = self.dtypes[i] if i < len(self.dtypes) else torch.float32
            t = torch.randn(shape, generator=g)
            if i == 0:
                t = t * self.scale + self.mean
            elif i == 4:  # running_var > 0
                t = t.abs() + 0.5
            out.append(t.to(dtype))
        return out


def bn(training: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Callable:
    return lambda x, w, b, rm, rv: A.native_batch_norm(x, w, b, rm, rv, training, momentum, eps)


def ln(shape: list[int], eps: float = 1e-5) -> Callable:
    return lambda x, *wb: A.native_layer_norm(x, shape, *(list(wb) + [None] * (2 - len(wb))), eps)


def gn(groups: int, eps: float = 1e-5, affine: bool = True) -> Callable:
    def fn(x, *wb):
        n, c = x.shape[:2]
        w, b = (wb[0], wb[1]) if affine else (None, None)
        return A.native_group_norm(x, w, b, n, c, x[0, 0].numel(), groups, eps)

    return fn


F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32
CASES = [
    # layer norm: row in registers (small and odd rows), split rows, no affine, weight only
    Case("ln-64-mean", "native_layer_norm", ln([64]), [(300, 64), (64,), (64,)], mean=50.0, path="fused"),
    Case("ln-2d-noaffine", "native_layer_norm", ln([8, 40]), [(5, 8, 40)], path="fused"),
    Case("ln-odd", "native_layer_norm", ln([1001], eps=1e-3), [(7, 1001), (1001,), (1001,)], path="fused"),
    Case("ln-split-w", "native_layer_norm", ln([256, 130]), [(3, 256, 130), (256, 130)], path="split"),
    Case("ln-split-odd", "native_layer_norm", ln([33333]), [(2, 33333), (33333,), (33333,)], path="split"),
    Case("ln-f16", "native_layer_norm", ln([96]), [(33, 96), (96,), (96,)], [F16, F16, F16], tol=2e-3),
    Case("ln-bf16-mixed", "native_layer_norm", ln([2000]), [(17, 2000), (2000,), (2000,)], [BF16], tol=2e-2),
    Case("ln-only-out", "native_layer_norm", ln([40]), [(6, 3, 40), (40,), (40,)], only_out=True),
    # group norm: odd spatial sizes (the channel changes inside a vector), split rows, 3-D input
    Case("gn-odd", "native_group_norm", gn(4), [(3, 12, 7, 5), (12,), (12,)], path="fused"),
    Case("gn-split", "native_group_norm", gn(2, affine=False), [(3, 4, 150, 70)], mean=-20.0, path="split"),
    Case("gn-3d", "native_group_norm", gn(3, eps=1e-3), [(2, 6, 10), (6,), (6,)]),
    Case("gn-f16", "native_group_norm", gn(2), [(4, 6, 8, 8), (6,), (6,)], [F16, F16, F16], tol=2e-3),
    # batch norm, training: runs of H*W per channel (fused, split), [N, C] columns, BatchNorm1d on 3-D
    Case(
        "bn-fused",
        "native_batch_norm",
        bn(),
        [(6, 5, 9, 11), (5,), (5,), (5,), (5,)],
        mean=100.0,
        path="fused",
        mutates=True,
    ),
    Case(
        "bn-split",
        "native_batch_norm",
        bn(momentum=0.3),
        [(6, 5, 64, 64)] + [(5,)] * 4,
        path="split",
        mutates=True,
    ),
    Case("bn-short-runs", "native_batch_norm", bn(), [(40, 6, 7)] + [(6,)] * 4, path="split", mutates=True),
    Case(
        "bn-col-odd",
        "native_batch_norm",
        bn(),
        [(333, 77)] + [(77,)] * 4,
        mean=10.0,
        path="column",
        mutates=True,
    ),
    Case(
        "bn-col-vec",
        "native_batch_norm",
        bn(eps=1e-3),
        [(1000, 64)] + [(64,)] * 4,
        path="column",
        mutates=True,
    ),
    Case("bn-n1", "native_batch_norm", bn(), [(1, 6, 200, 200)] + [(6,)] * 4, path="split", mutates=True),
    Case(
        "bn-f16-mixed",
        "native_batch_norm",
        bn(),
        [(8, 4, 16, 16)] + [(4,)] * 4,
        [F16],
        tol=2e-3,
        mutates=True,
    ),
    Case("bn-eval", "native_batch_norm", bn(training=False), [(6, 5, 9, 11)] + [(5,)] * 4, path="eval"),
    Case("bn-eval-2d", "native_batch_norm", bn(training=False), [(33, 77)] + [(77,)] * 4, path="eval"),
    Case(
        "bn-nostats",
        "native_batch_norm",
        lambda x, w, b: A.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5),
        [(4, 3, 5, 5), (3,), (3,)],
    ),
    Case(
        "bn-noaffine",
        "native_batch_norm",
        lambda x, rm, rv: A.native_batch_norm(x, None, None, rm, rv, True, 0.1, 1e-5),
        [(4, 3, 5, 5), (3,), (3,)],
        only_out=True,
        mutates=True,
    ),
    # the other batch-norm forms: functional (the trace of the in-place one), no stats, eval
    Case(
        "bn-legit-functional",
        "_native_batch_norm_legit_functional",
        lambda x, w, b, rm, rv: A._native_batch_norm_legit(x, w, b, rm, rv, True, 0.2, 1e-5),
        [(4, 3, 6, 6)] + [(3,)] * 4,
    ),
    Case(
        "bn-legit-nostats",
        "_native_batch_norm_legit",
        lambda x, w, b: A._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
        [(4, 3, 6, 6), (3,), (3,)],
    ),
    Case(
        "bn-legit-eval",
        "_native_batch_norm_legit_no_training",
        lambda x, w, b, rm, rv: A._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5),
        [(4, 3, 6, 6)] + [(3,)] * 4,
    ),
]
# channels-last storage: batch norm's channels are the columns of [N * spatial, C]; group norm's rows
# are runs of a group's adjacent channels, C apart (rows that fit: fused; else grouped, whole rows of
# channels a warp; split where STITCHCUDA_GROUP_NORM_ROWS=0)
GROUPED_OFF = {emit_norm.GROUPED_ENV: "0"}
CASES += [
    Case("bn-nhwc", "native_batch_norm", bn(), [(4, 8, 6, 7)] + [(8,)] * 4, mean=10.0, path="column",
         mutates=True, channels_last=True),
    Case("bn-nhwc-odd", "native_batch_norm", bn(momentum=0.2), [(3, 37, 5, 3, 2)] + [(37,)] * 4, path="column",
         mutates=True, channels_last=True),
    Case("gn-nhwc-split", "native_group_norm", gn(2), [(3, 8, 20, 30), (8,), (8,)], mean=-5.0, path="split",
         channels_last=True, env=GROUPED_OFF),
    Case("gn-nhwc-grouped", "native_group_norm", gn(2), [(3, 8, 20, 30), (8,), (8,)], mean=-5.0, path="grouped",
         channels_last=True),
    Case("gn-nhwc-fused", "native_group_norm", gn(2), [(2, 64, 5, 7), (64,), (64,)], path="fused",
         channels_last=True),
    Case("gn-nhwc-3d", "native_group_norm", gn(3, affine=False), [(2, 12, 4, 5, 3)], path="grouped",
         channels_last=True),
    Case("gn-nhwc-3d-split", "native_group_norm", gn(3, affine=False), [(2, 12, 4, 5, 3)], path="split",
         channels_last=True, env=GROUPED_OFF),
    Case("gn-nhwc-f16", "native_group_norm", gn(2), [(2, 16, 9, 9), (16,), (16,)], [F16, F16, F16], tol=2e-3,
         path="grouped", channels_last=True),
    # a row of 40 vectors: 6 rows a block, 16 threads idle
    Case("gn-nhwc-wide", "native_group_norm", gn(5), [(2, 160, 24, 24), (160,), (160,)], mean=3.0, path="grouped",
         channels_last=True),
    # 1024 channels: tiles of whole groups (2 of 512 channels at VEC 4)
    Case("gn-nhwc-tiles", "native_group_norm", gn(16, eps=1e-3), [(2, 1024, 20, 20), (1024,), (1024,)],
         path="grouped", channels_last=True),
    # one channel a group (an instance norm, planner.instance_norm_as_group_norm): a column per row
    Case("gn-nhwc-instance", "native_group_norm", gn(12, affine=False), [(3, 12, 30, 40)], mean=2.0,
         path="grouped", channels_last=True),
    # 3 channels a group: one element a thread
    Case("gn-nhwc-odd", "native_group_norm", gn(4), [(2, 12, 30, 40), (12,), (12,)], mean=1.0, path="grouped",
         channels_last=True),
]
# Large mean, small spread: the shifted statistics keep the spread; compared with fp64 below.
HARD = [
    Case("hard-ln-fused", "native_layer_norm", ln([512]), [(64, 512)], mean=1e4, scale=0.1, tol=2e-2),
    Case(
        "hard-ln-split",
        "native_layer_norm",
        ln([40000]),
        [(2, 40000)],
        mean=1e4,
        scale=0.1,
        tol=2e-2,
    ),
    Case(
        "hard-bn-split",
        "native_batch_norm",
        bn(),
        [(8, 3, 64, 64)] + [(3,)] * 4,
        mean=1e4,
        scale=0.1,
        tol=2e-2,
        mutates=True,
    ),
    Case(
        "hard-bn-col",
        "native_batch_norm",
        bn(),
        [(2000, 40)] + [(40,)] * 4,
        mean=-1e4,
        scale=0.1,
        tol=2e-2,
        mutates=True,
    ),
    Case("hard-gn-nhwc", "native_group_norm", gn(4, affine=False), [(2, 32, 40, 40)], mean=1e4, scale=0.1, tol=2e-2,
         channels_last=True),
]


def _to_channels_last(g: list[graph.Node], node: graph.Node) -> None:
    """The traced op made a norm of channels-last storage, as the planner rewrites one."""
    nodes = graph.by_name(g)
    x = nodes[graph.ref_name(node["args"]["input"])]
    for n in [x, *(n for n in g if n["op"] == "getitem" and n["args"]["index"] == 0)]:
        shape = [n["shape"][0], *n["shape"][2:], n["shape"][1]]
        n["shape"], n["stride"] = shape, graph.contiguous_strides(shape)
    node["args"] = {**node["args"], "channels_last": True}


def _emit(case: Case, name: str) -> tuple[kernels.Kernel, list[graph.Node], list[torch.Tensor]]:
    tensors = case.inputs(0)
    g = graph.trace_module(Fn(case.fn), tensors)
    node = next(n for n in g if n["op"] == case.op)
    if case.channels_last:
        _to_channels_last(g, node)
        tensors = [tensors[0].movedim(1, -1).contiguous(), *tensors[1:]]
    live = None
    if case.only_out:
        live = {n["name"] for n in g if n["op"] == "getitem" and n["args"]["index"] == 0}
    kernel = emit_norm.EMITTERS[case.op](kernels.context(g, node["name"], name, live=live))
    return kernel, g, tensors


def _emit_in_env(case: Case, name: str) -> tuple[kernels.Kernel, list[graph.Node], list[torch.Tensor]]:
    with pytest.MonkeyPatch.context() as env:
        for k, v in case.env.items():
            env.setenv(k, v)
        return _emit(case, name)


def _build(sources: list[str]) -> runtime.Library:
    path = Path(runtime.cache_dir().parent / "norm_test.cu")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(codegen.render([], after=sources) + "\n" + "\n".join(sources))
    return runtime.Library(runtime.build([path]).library)


def _run(kernel: kernels.Kernel, g: list[graph.Node], tensors: list[torch.Tensor], launch: Callable):
    """Kernel inputs (cloned), its NaN-filled outputs by graph name; launch(args) runs it."""
    nodes = graph.by_name(g)
    ins = [tensors[nodes[a.name]["index"]].clone() for a in kernel.inputs]
    outs = {
        a.name: torch.full(nodes[a.name]["shape"], torch.nan, dtype=getattr(torch, a.dtype))
        for a in kernel.outputs
    }
    scratch = [torch.full((n,), torch.nan, dtype=getattr(torch, d)) for d, n in kernel.scratch]
    launch(ins + list(outs.values()) + scratch)
    return {a.name: t for a, t in zip(kernel.inputs, ins, strict=True)}, outs


def _expected(
    case: Case, g: list[graph.Node], tensors: list[torch.Tensor], dtype=None
) -> dict[str, torch.Tensor]:
    """PyTorch's value of every getitem of the op and of every input after the call (running stats)."""
    args = [t.clone() if dtype is None else t.to(dtype) for t in tensors]
    if case.channels_last:
        args[0] = args[0].movedim(-1, 1).contiguous()  # CUDA's group norm takes contiguous input only
    results = list(case.fn(*args))
    if case.channels_last:
        results[0] = results[0].movedim(1, -1).contiguous()
    if case.op == "_native_batch_norm_legit_functional":
        results += [args[3], args[4]]  # the traced functional form returns the updated statistics
    want = {n["name"]: results[n["args"]["index"]] for n in g if n["op"] == "getitem"}
    want |= {n["name"]: args[n["index"]] for n in g if n["op"] == "input"}
    return want


def _check(case: Case, kernel, got_in, got_out, want, tol) -> None:
    assert set(kernel.mutates) <= set(got_in)
    for name, t in [*got_out.items(), *((m, got_in[m]) for m in kernel.mutates)]:
        ref = want[name]
        if t.numel() == 0:  # eval-mode statistics: empty in the trace (CUDA returns them anyway)
            continue
        # Dtypes follow the graph: with bf16 input and fp32 weights, the trace's (meta) layer-norm
        # statistics are bf16 where the CPU kernel returns fp32.
        assert t.shape == ref.shape and (t.dtype == ref.dtype or name != kernel.outputs[0].name), name
        torch.testing.assert_close(
            t.double(), ref.double(), rtol=tol, atol=tol, msg=lambda m, n=name: f"{case.id} {n}: {m}"
        )


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory) -> tuple[runtime.Library, list]:
    if runtime.find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    mp = pytest.MonkeyPatch()
    mp.setenv("STITCHCUDA_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("STITCHCUDA_ARCH", "sm_90")
    try:
        emitted = [_emit_in_env(c, f"k{i}") for i, c in enumerate(CASES + HARD)]
        lib = _build([k.source for k, _, _ in emitted])
    finally:
        mp.undo()
    return lib, emitted


def _host(lib: runtime.Library, kernel: kernels.Kernel) -> Callable:
    def launch(tensors: list[torch.Tensor]) -> None:
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in tensors]
        assert lib._fn(f"{kernel.name}_host")(*ptrs, ctypes.c_void_p(None)) == 0

    return launch


@needs_nvcc
@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.id for c in CASES])
def test_host_matches_torch(host_lib, index: int) -> None:
    lib, emitted = host_lib
    case = CASES[index]
    kernel, g, tensors = emitted[index]
    if case.path:
        assert f"({case.path}" in kernel.ops[0], kernel.ops
    got_in, got_out = _run(kernel, g, tensors, _host(lib, kernel))
    _check(case, kernel, got_in, got_out, _expected(case, g, tensors), case.tol)
    if case.only_out:
        assert len(kernel.outputs) == 1
    assert kernel.mutates == ([a.name for a in kernel.inputs[-2:]] if case.mutates else [])


@needs_nvcc
@pytest.mark.parametrize("index", range(len(HARD)), ids=[c.id for c in HARD])
def test_host_large_mean_small_spread(host_lib, index: int) -> None:
    """Mean 1e4, spread 0.1: fp32 data keeps ~4 significant digits of the spread; the outputs must
    stay as close to the fp64 truth as that allows (PyTorch's own fp32 kernels get the same)."""
    lib, emitted = host_lib
    case = HARD[index]
    kernel, g, tensors = emitted[len(CASES) + index]
    got_in, got_out = _run(kernel, g, tensors, _host(lib, kernel))
    exact = {k: v.float() for k, v in _expected(case, g, tensors, torch.float64).items()}
    fp32 = _expected(case, g, tensors)
    y = kernel.outputs[0].name
    ours = (got_out[y] - exact[y]).abs().max().item()
    torchs = (fp32[y] - exact[y]).abs().max().item()
    assert ours <= max(2 * torchs, 1e-3), (case.id, ours, torchs)
    _check(case, kernel, got_in, got_out, exact, case.tol)


def test_refusals() -> None:
    def ctx_of(fn: Callable, tensors: list[torch.Tensor], op: str) -> kernels.EmitContext:
        g = graph.trace_module(Fn(fn), tensors)
        return kernels.context(g, next(n for n in g if n["op"] == op)["name"], "k0")

    x = torch.randn(4, 3, 5)
    ctx = ctx_of(lambda x: A.native_layer_norm(x, [5], None, None, 1e-5), [x], "native_layer_norm")
    ctx.args["input"] = kernels.Operand("x", (4, 3, 5), (1, 4, 12), 0, "float32")  # a transposed view
    with pytest.raises(kernels.NotSupported, match="strided"):
        emit_norm.EMITTERS["native_layer_norm"](ctx)
    ctx = ctx_of(bn(training=False), [x, *(torch.ones(3),) * 4], "native_batch_norm")
    ctx.args["running_var"] = None
    with pytest.raises(kernels.NotSupported, match="running"):
        emit_norm.EMITTERS["native_batch_norm"](ctx)
    ctx = ctx_of(lambda x: A.native_layer_norm(x, [5], None, None, 1e-5), [x.double()], "native_layer_norm")
    with pytest.raises(kernels.NotSupported, match="dtype"):
        emit_norm.EMITTERS["native_layer_norm"](ctx)


@needs_nvcc
def test_real_modules_on_host(tmp_path) -> None:
    """Traces of nn modules as KernelBench builds them (training mode): the graph reads only the
    output, and BatchNorm's running statistics are the module's buffers, updated in place."""
    torch.manual_seed(0)
    mods = [
        (nn.BatchNorm2d(6), (4, 6, 10, 10), "native_batch_norm"),
        (nn.InstanceNorm2d(6), (4, 6, 10, 10), "native_batch_norm"),
        (nn.GroupNorm(3, 6), (4, 6, 10, 10), "native_group_norm"),
        (nn.LayerNorm([10, 10]), (4, 6, 10, 10), "native_layer_norm"),
    ]
    emitted = []
    for i, (mod, shape, op) in enumerate(mods):
        x = torch.randn(shape) * 2 + 3
        g = graph.trace_module(mod, [x])
        live = {n["name"] for n in g} - {n["name"] for n in g if n["op"] == "getitem" and n["args"]["index"]}
        node = next(n for n in g if n["op"] == op)
        kernel = emit_norm.EMITTERS[op](kernels.context(g, node["name"], f"m{i}", live=live))
        assert len(kernel.outputs) == 1
        emitted.append((mod, x, g, kernel))
    lib = _build([k.source for *_, k in emitted])
    for mod, x, g, kernel in emitted:
        nodes = graph.by_name(g)
        state = dict(mod.named_parameters()) | dict(mod.named_buffers())
        values = {
            n: (x if nodes[n]["kind"] == "arg" else state[nodes[n]["key"]])
            for n in nodes
            if nodes[n]["op"] == "input"
        }
        ins = [values[a.name].detach().clone() for a in kernel.inputs]
        out = torch.full(x.shape, torch.nan)
        scratch = [torch.full((n,), torch.nan) for _, n in kernel.scratch]
        _host(lib, kernel)([*ins, out, *scratch])
        ref = mod(x)  # updates the module's running statistics
        torch.testing.assert_close(out, ref.detach(), rtol=1e-4, atol=1e-4)
        for a, t in zip(kernel.inputs, ins, strict=True):
            if a.name in kernel.mutates:
                torch.testing.assert_close(t, values[a.name], rtol=1e-5, atol=1e-6)
        if isinstance(mod, nn.BatchNorm2d):
            assert len(kernel.mutates) == 2


# ---------------------------------------------------------------------------------------------
# The real launchers on a GPU

GPU_CASES = [c for c in CASES + HARD if c.path or c.id.startswith("hard")] + [
    Case("gpu-ln-big", "native_layer_norm", ln([4096]), [(2048, 4096), (4096,), (4096,)], path="fused"),
    Case("gpu-gn-big", "native_group_norm", gn(8), [(16, 64, 64, 64), (64,), (64,)], mean=5.0, path="split"),
    Case("gpu-bn-big", "native_batch_norm", bn(), [(32, 64, 56, 56)] + [(64,)] * 4, mean=5.0, path="split"),
    Case("gpu-bn-col", "native_batch_norm", bn(), [(1024, 4096)] + [(4096,)] * 4, path="column"),
    # 16 and 64 channels: several rows a warp (norm_column.cuh's lpr)
    Case("gpu-bn-col16", "native_batch_norm", bn(), [(1 << 20, 16)] + [(16,)] * 4, mean=3.0, path="column"),
    Case("gpu-bn-nhwc64", "native_batch_norm", bn(), [(8, 64, 33, 35)] + [(64,)] * 4, path="column",
         channels_last=True),
    # Large enough that ew_grid caps the grid and each thread loops over vectors of its channels
    # (96 channels: blocks in multiples of 3 keep the step a multiple of them).
    Case("gpu-bn-nhwc96-big", "native_batch_norm", bn(), [(64, 96, 64, 64)] + [(96,)] * 4, mean=2.0,
         path="column", channels_last=True),
    Case("gpu-in", "native_batch_norm", bn(), [(1, 512, 128, 128)] + [(512,)] * 4, path="fused"),
    Case("gpu-in-split", "native_batch_norm", bn(), [(1, 64, 512, 512)] + [(64,)] * 4, path="split"),
    Case("gpu-ln-row64", "native_layer_norm", ln([64]), [(65536, 64), (64,), (64,)], path="fused"),
]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_torch() -> None:
    emitted = [_emit_in_env(c, f"g{i}") for i, c in enumerate(GPU_CASES)]
    lib = _build([k.source for k, _, _ in emitted])
    for case, (kernel, g, tensors) in zip(GPU_CASES, emitted, strict=True):
        assert not case.path or f"({case.path}" in kernel.ops[0], kernel.ops
        cuda = [t.cuda() for t in tensors]

        def launch(args: list[torch.Tensor], kernel=kernel) -> None:
            lib.call(kernel.name, *args)
            torch.cuda.synchronize()

        nodes = graph.by_name(g)
        ins = [cuda[nodes[a.name]["index"]].clone() for a in kernel.inputs]
        outs = {
            a.name: torch.full(
                nodes[a.name]["shape"], torch.nan, dtype=getattr(torch, a.dtype), device="cuda"
            )
            for a in kernel.outputs
        }
        scratch = [torch.full((n,), torch.nan, device="cuda") for _, n in kernel.scratch]
        launch(ins + list(outs.values()) + scratch)
        got_in = {a.name: t.cpu() for a, t in zip(kernel.inputs, ins, strict=True)}
        got_out = {k: v.cpu() for k, v in outs.items()}
        if case.id.startswith("hard"):  # PyTorch's fp32 is further from the truth than the tolerance
            want = {k: v.float() for k, v in _expected(case, g, tensors, torch.float64).items()}
        else:
            want = {k: v.cpu() for k, v in _expected(case, g, cuda).items()}
        _check(case, kernel, got_in, got_out, want, max(case.tol, 1e-3))


@pytest.mark.skipif(runtime.find_nvcc() is None, reason="nvcc is not installed")
def test_channels_last_batch_norm_builds_clean_for_sm90(tmp_path, monkeypatch) -> None:
    """The column shape's elementwise pass (channels kept in registers, unrolled loads) and its grid
    compile for sm_90 without a warning, in a candidate as the Coder writes it."""
    from conftest import assert_builds_clean_for_sm90, builtin_candidate
    from test_emit_conv import cudnn_include

    include = cudnn_include()
    if include is None:
        pytest.skip("no cudnn.h: set STITCHCUDA_EXTRA_INCLUDE to a folder with cuDNN's headers")
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    module = nn.Sequential(nn.Conv2d(3, 96, 3), nn.BatchNorm2d(96), nn.Tanh(), nn.MaxPool2d(2))
    cand = builtin_candidate(module, [torch.randn(2, 3, 16, 16)], host=False)
    assert "(column" in cand.files["model_new.py"]
    assert_builds_clean_for_sm90(cand, tmp_path / "bn.cu", include)
