"""Pooling emitters: generated kernels against PyTorch, on the CPU through their host entries (all
cases in one nvcc build) and, where a GPU is present, through the real launchers."""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import Fn, needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_pool, kernels

pytestmark = pytest.mark.usefixtures("isolated_cache")


@dataclass
class Case:
    id: str
    fn: Callable  # the op as a module would call it; max pools return (values, indices)
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    indices: bool = False  # the graph reads the indices (else the kernel skips them)
    fill: str = "random"  # "random", "nan" or "ninf"
    view: Callable | None = None  # applied to the input inside forward (strided operands)
    wide: bool = False  # force 64-bit index math
    # Input and outputs stored channels-last (N, spatial..., C), as planner.channels_last_convs leaves
    # a convolution's result; fn still takes and returns NCHW, the test moves the channels.
    channels_last: bool = False

    def input(self, seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(self.shape, generator=g) * 3
        pick = torch.rand(self.shape, generator=g)
        big = 1e30 if self.dtype == torch.float32 else 1e4
        x = torch.where(pick < 0.05, x * big, x)
        x = torch.where((pick > 0.05) & (pick < 0.1), x * 1e-30, x)
        if self.fill == "nan":
            x = torch.where(pick > 0.93, torch.nan, x)
        if self.fill == "ninf":
            x = torch.where(pick > 0.3, -torch.inf, x)
            x[..., :3] = -torch.inf
        return x.to(self.dtype)

    def reference(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self.fn(self.view(x) if self.view else x)
        return (out[0], out[1]) if isinstance(out, tuple) else (out, None)


def _last(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.movedim(1, -1).contiguous()


def _max(fn: Callable, **kw) -> Callable:
    return lambda x: fn(x, return_indices=True, **kw)


CASES = [
    # channels-last storage: a channel per thread, windows C apart (indices stay positions in a plane)
    Case("max2d-nhwc-k3s2p1", _max(F.max_pool2d, kernel_size=3, stride=2, padding=1), (2, 5, 11, 10),
         indices=True, channels_last=True),
    Case("max2d-nhwc-ceil-dil", _max(F.max_pool2d, kernel_size=(2, 3), stride=(1, 2), padding=(1, 0),
                                      dilation=(2, 1), ceil_mode=True), (2, 3, 13, 8), channels_last=True),
    Case("avg3d-nhwc-nopad-count", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False),
         (2, 6, 7, 6, 9), channels_last=True),
    Case("avg2d-nhwc-adaptive", lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (2, 7, 11, 9), channels_last=True),
    Case("max2d-nhwc-adaptive", lambda x: F.adaptive_max_pool2d(x, (3, 5), return_indices=True), (2, 4, 10, 11),
         indices=True, channels_last=True),
    # max pooling: padding, dilation, ceil_mode, odd sizes, NaN, all -inf windows, views
    Case(
        "max2d-k3s2p1", _max(F.max_pool2d, kernel_size=3, stride=2, padding=1), (2, 3, 11, 10), indices=True
    ),
    Case("max2d-k2s2", _max(F.max_pool2d, kernel_size=2), (2, 5, 9, 13)),
    Case(
        "max2d-ceil-dil",
        _max(
            F.max_pool2d, kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1), ceil_mode=True
        ),
        (2, 3, 13, 8),
        indices=True,
    ),
    Case(
        "max2d-dil3",
        _max(F.max_pool2d, kernel_size=3, stride=2, padding=1, dilation=3),
        (1, 2, 17, 15),
        indices=True,
    ),
    Case(
        "max2d-ceil-k3s2",
        _max(F.max_pool2d, kernel_size=3, stride=2, ceil_mode=True),
        (2, 2, 10, 9),
        indices=True,
    ),
    Case(
        "max2d-nan",
        _max(F.max_pool2d, kernel_size=3, stride=1, padding=1),
        (2, 3, 8, 9),
        fill="nan",
        indices=True,
    ),
    Case(
        "max2d-ninf",
        _max(F.max_pool2d, kernel_size=3, stride=2, padding=1),
        (2, 3, 8, 9),
        fill="ninf",
        indices=True,
    ),
    Case("max2d-unbatched", _max(F.max_pool2d, kernel_size=2), (3, 10, 7), indices=True),
    Case(
        "max2d-transposed",
        _max(F.max_pool2d, kernel_size=3, stride=2, padding=1),
        (2, 3, 9, 12),
        indices=True,
        view=lambda x: x.transpose(2, 3),
    ),
    Case("max2d-fp16", _max(F.max_pool2d, kernel_size=3, stride=2, padding=1), (2, 3, 11, 10), torch.float16),
    Case("max2d-bf16-nan", _max(F.max_pool2d, kernel_size=2), (2, 3, 8, 10), torch.bfloat16, True, "nan"),
    Case(
        "max2d-wide",
        _max(F.max_pool2d, kernel_size=3, stride=2, padding=1),
        (2, 3, 11, 10),
        indices=True,
        wide=True,
    ),
    Case(
        "max1d", _max(F.max_pool1d, kernel_size=4, stride=2, padding=2, dilation=2), (2, 3, 37), indices=True
    ),
    Case("max1d-module", nn.MaxPool1d(8, stride=1, padding=4, dilation=3), (2, 4, 41)),
    Case(
        "max3d",
        _max(F.max_pool3d, kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True),
        (2, 2, 9, 8, 11),
        indices=True,
    ),
    Case("max3d-k2", _max(F.max_pool3d, kernel_size=2), (2, 3, 7, 6, 9), fill="nan"),
    Case(
        "max3d-wide",
        _max(F.max_pool3d, kernel_size=(2, 3, 2), stride=(1, 2, 3)),
        (2, 2, 5, 9, 10),
        indices=True,
        wide=True,
    ),
    # average pooling: count_include_pad, ceil_mode, divisor_override
    Case("avg2d-k3s2p1", lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 11, 10)),
    Case("avg2d-nopad", lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), (2, 3, 11, 10)),
    Case("avg2d-ceil", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 3, 12, 9)),
    Case("avg2d-ceil-nopad", lambda x: F.avg_pool2d(x, (3, 2), (2, 3), (1, 1), True, False), (2, 3, 12, 10)),
    Case("avg2d-ceil-nopad0", lambda x: F.avg_pool2d(x, 3, 2, 0, True, False), (2, 3, 10, 10)),
    Case("avg2d-divisor", lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5), (2, 3, 11, 10)),
    Case("avg2d-k11", lambda x: F.avg_pool2d(x, 11), (1, 2, 25, 23)),
    Case("avg2d-k12-rolled", lambda x: F.avg_pool2d(x, 12, 5, 6, True, False), (1, 2, 30, 29)),
    Case("avg2d-nan", lambda x: F.avg_pool2d(x, 2), (2, 3, 8, 9), fill="nan"),
    Case("avg2d-fp16", lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 11, 10), torch.float16),
    Case("avg2d-bf16", lambda x: F.avg_pool2d(x, 2, 2, 1, True, False), (2, 3, 11, 10), torch.bfloat16),
    Case("avg2d-wide", lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), (2, 3, 12, 9), wide=True),
    Case("avg1d-module", nn.AvgPool1d(8, stride=1, padding=4), (2, 4, 37)),
    Case("avg3d", lambda x: F.avg_pool3d(x, 3, 2, 1), (2, 2, 9, 8, 11)),
    Case("avg3d-ceil-nopad", lambda x: F.avg_pool3d(x, (2, 3, 3), 2, 1, True, False), (2, 2, 9, 8, 11)),
    Case("avg3d-divisor", lambda x: F.avg_pool3d(x, 2, divisor_override=3), (2, 2, 6, 7, 8)),
    # adaptive pooling with windows that overlap and differ in size
    Case("adaptive-avg2d", lambda x: F.adaptive_avg_pool2d(x, (5, 3)), (2, 3, 17, 10)),
    Case("adaptive-avg2d-up", lambda x: F.adaptive_avg_pool2d(x, (7, 9)), (2, 3, 5, 4)),
    Case("adaptive-avg1d", lambda x: F.adaptive_avg_pool1d(x, 6), (2, 3, 23)),
    Case("adaptive-avg3d", lambda x: F.adaptive_avg_pool3d(x, (3, 4, 2)), (2, 2, 7, 9, 5)),
    Case("adaptive-avg2d-bf16", lambda x: F.adaptive_avg_pool2d(x, (4, 6)), (2, 3, 9, 13), torch.bfloat16),
    Case("adaptive-max2d", lambda x: F.adaptive_max_pool2d(x, (5, 3), True), (2, 3, 17, 10), indices=True),
    Case(
        "adaptive-max2d-nan",
        lambda x: F.adaptive_max_pool2d(x, (4, 4), True),
        (2, 3, 9, 11),
        fill="nan",
        indices=True,
    ),
    Case("adaptive-max1d", lambda x: F.adaptive_max_pool1d(x, 7, True), (2, 3, 30), indices=True),
    Case(
        "adaptive-max3d", lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), True), (2, 2, 5, 7, 9), indices=True
    ),
]


def _emit(case: Case, name: str) -> kernels.Kernel:
    x = case.input(0)
    fn = (lambda t: case.fn(case.view(t))) if case.view else case.fn
    g = graph.trace_module(Fn(fn), [x])
    pools = [n for n in g if n["op"] in emit_pool.EMITTERS]
    assert len(pools) == 1, [n["op"] for n in g]
    node = pools[0]
    dropped = {
        n["name"]
        for n in g
        if n["op"] == "getitem" and n["args"]["self"] == {"ref": node["name"]} and n["args"]["index"] == 1
    }
    live = {n["name"] for n in g} - (set() if case.indices else dropped)
    if case.channels_last:
        results = [n for n in g if n["op"] == "getitem" and n["args"]["self"] == {"ref": node["name"]}] or [node]
        for n in [next(n for n in g if n["name"] == "x"), *results]:
            shape = [n["shape"][0], *n["shape"][2:], n["shape"][1]]
            n["shape"], n["stride"] = shape, graph.contiguous_strides(shape)
        node["args"] = {**node["args"], "channels_last": True}
    ctx = kernels.context(g, node["name"], name, live=live)
    kernel = emit_pool.EMITTERS[node["op"]](ctx)
    assert ("channels-last" in kernel.ops[0]) == case.channels_last, kernel.ops
    assert [a.name for a in kernel.inputs] == ["x"]
    assert len(kernel.outputs) == (2 if case.indices else 1)
    return kernel


def _emit_all(monkeypatch: pytest.MonkeyPatch) -> list[kernels.Kernel]:
    out = []
    for i, case in enumerate(CASES):
        with monkeypatch.context() as m:
            if case.wide:
                m.setattr(emit_pool, "INT32_LIMIT", 0)
            out.append(_emit(case, f"pool{i}"))
    return out


def _buffers(case: Case, ref: tuple[torch.Tensor, torch.Tensor | None], device: str) -> list[torch.Tensor]:
    """NaN-poisoned outputs: every element must be written."""
    values = torch.full(ref[0].shape, torch.nan, dtype=case.dtype, device=device)
    if not case.indices:
        return [values]
    return [values, torch.full(ref[0].shape, -7, dtype=torch.int64, device=device)]


def _check(case: Case, got: list[torch.Tensor], ref: tuple[torch.Tensor, torch.Tensor | None]) -> None:
    values = got[0].cpu().float()
    want = ref[0].cpu().float()
    if "max" in case.id:
        torch.testing.assert_close(values, want, rtol=0, atol=0, equal_nan=True, msg=case.id)
    else:
        tol = 1e-5 if case.dtype == torch.float32 else 1e-2
        torch.testing.assert_close(values, want, rtol=tol, atol=tol * 1e-3, equal_nan=True, msg=case.id)
    if case.indices:
        assert ref[1] is not None
        assert torch.equal(got[1].cpu(), ref[1].cpu()), case.id


@pytest.fixture(scope="module")
def host_library(tmp_path_factory) -> tuple[list[kernels.Kernel], runtime.Library]:
    """Every case's kernel in one .cu, built once for the CPU entries."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("STITCHCUDA_ARCH", "sm_90")
    try:
        ks = _emit_all(monkeypatch)
        lib = kernels.library(ks, tmp_path_factory.mktemp("pool"))
    finally:
        monkeypatch.undo()
    return ks, lib


@needs_nvcc
@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.id for c in CASES])
def test_host_matches_torch(host_library, i):
    ks, lib = host_library
    case = CASES[i]
    for seed in (1, 2):
        x = case.input(seed)
        ref = case.reference(x)
        if case.channels_last:
            x, ref = _last(x), (_last(ref[0]), _last(ref[1]))
        outs = _buffers(case, ref, "cpu")
        rc = lib._fn(f"{ks[i].name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in [x, *outs]), None)
        assert rc == 0
        _check(case, outs, ref)


@needs_nvcc
def test_run_host_entry():
    """kernels.run_host, the path other families' tests use, on one kernel."""
    case = next(c for c in CASES if not c.channels_last)
    kernel = _emit(case, "one")
    x = case.input(3)
    ref = case.reference(x)
    outs = _buffers(case, ref, "cpu")
    kernels.run_host(kernel, [x, *outs])
    _check(case, outs, ref)


# ---------------------------------------------------------------------------------------------
# Emission without a compiler: the ops a trace never shows, what is generated, what is refused


def _hand_graph(op: str, args: dict, shape: list[int], out: list[int], results: int) -> list[dict]:
    """A one-op graph written by hand (the 1d ops are composite: tracing never produces them)."""
    x = {
        "name": "x",
        "op": "input",
        "shape": shape,
        "dtype": "float32",
        "stride": _strides(shape),
        "kind": "arg",
    }
    node = {"name": "p", "op": op, "target": f"aten.{op}.default", "args": {"self": {"ref": "x"}, **args}}
    if results == 1:
        node.update(shape=out, dtype="float32", stride=_strides(out))
        return [x, node]
    node["outputs"] = [{"shape": out, "dtype": d, "stride": _strides(out)} for d in ("float32", "int64")]
    items = [
        {"name": f"p_{i}", "op": "getitem", "args": {"self": {"ref": "p"}, "index": i}, "shape": out}
        | {"dtype": d, "stride": _strides(out)}
        for i, d in enumerate(("float32", "int64"))
    ]
    return [x, node, *items]


def _strides(shape: list[int]) -> list[int]:
    return [math.prod(shape[i + 1 :]) for i in range(len(shape))]


ONE_D = [
    (
        "max_pool1d",
        {"kernel_size": [3], "stride": [2], "padding": [1], "dilation": [1], "ceil_mode": False},
        9,
        1,
    ),
    (
        "max_pool1d_with_indices",
        {"kernel_size": [3], "stride": [], "padding": [0], "dilation": [2], "ceil_mode": True},
        5,
        2,
    ),
    (
        "avg_pool1d",
        {"kernel_size": [4], "stride": [3], "padding": [2], "ceil_mode": True, "count_include_pad": False},
        7,
        1,
    ),
    ("adaptive_avg_pool1d", {"output_size": [5]}, 5, 1),
    ("adaptive_max_pool1d", {"output_size": [4]}, 4, 2),
]


@needs_nvcc
def test_one_d_ops_by_hand():
    """The aten 1d ops, emitted from hand-written nodes and run against their torch calls."""
    x = torch.randn(2, 3, 17) * 10
    calls = {
        "max_pool1d": lambda a: (torch.ops.aten.max_pool1d(x, [3], [2], [1], [1], False),),
        "max_pool1d_with_indices": lambda a: torch.ops.aten.max_pool1d_with_indices(
            x, [3], [], [0], [2], True
        ),
        "avg_pool1d": lambda a: (torch.ops.aten.avg_pool1d(x, [4], [3], [2], True, False),),
        "adaptive_avg_pool1d": lambda a: (torch.ops.aten.adaptive_avg_pool1d(x, [5]),),
        "adaptive_max_pool1d": lambda a: torch.ops.aten.adaptive_max_pool1d(x, [4]),
    }
    ks, refs = [], []
    for i, (op, args, n, results) in enumerate(ONE_D):
        g = _hand_graph(op, args, [2, 3, 17], [2, 3, n], results)
        ks.append(kernels.emit(g, "p", f"oned{i}"))
        refs.append(calls[op](args))
        assert refs[-1][0].shape[-1] == n
    lib = kernels.library(ks, runtime.cache_dir().parent / "oned")
    for k, ref in zip(ks, refs, strict=True):
        outs = [torch.full_like(r, -5) for r in ref]
        assert lib._fn(f"{k.name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in [x, *outs]), None) == 0
        for got, want in zip(outs, ref, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=k.name)


def test_registered_ops_are_aten_ops():
    for op in emit_pool.EMITTERS:
        assert hasattr(torch.ops.aten, op), op


def test_unused_indices_are_not_written():
    kernel = _emit(CASES[1], "k")
    assert "ix[o]" not in kernel.source and "arg" not in kernel.source
    assert len(kernel.outputs) == 1 and kernel.outputs[0].dtype == "float32"


def test_windows_inside_the_input_need_no_bounds_checks():
    """No padding, no ceil overhang: the window loop is branch-free (and unrolls)."""
    kernel = _emit(Case("k2", _max(F.max_pool2d, kernel_size=2), (2, 3, 8, 8)), "k")
    assert "continue" not in kernel.source
    assert " int o" in kernel.source  # 32-bit index math for small tensors


def test_big_windows_are_not_unrolled_in_full():
    small = _emit(Case("k11", lambda x: F.avg_pool2d(x, 11), (1, 2, 25, 23)), "k")
    big = _emit(Case("k12", lambda x: F.avg_pool2d(x, 12), (1, 2, 25, 23)), "k")
    assert "unroll 1" not in small.source
    assert big.source.count("#pragma unroll 1") == 1  # the outer dim; a 12-wide row still unrolls


def test_large_tensors_use_64_bit_index_math():
    g = _hand_graph(
        "avg_pool2d",
        {"kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]},
        [64, 128, 512, 512],
        [64, 128, 256, 256],
        1,
    )
    g[1]["args"] |= {"ceil_mode": False, "count_include_pad": True, "divisor_override": None}
    assert "int64_t o," in kernels.emit(g, "p", "k").source


@pytest.mark.parametrize(
    "op, args, shape, out, why",
    [
        (
            "max_pool2d",
            {
                "kernel_size": [2, 2],
                "stride": [2, 2],
                "padding": [0, 0],
                "dilation": [1, 1],
                "ceil_mode": False,
            },
            [2, 3, 8, 8],
            [2, 3, 5, 4],
            "differs",
        ),
        (
            "max_pool2d",
            {"kernel_size": [2, 2, 2], "stride": [], "padding": 0, "dilation": 1, "ceil_mode": False},
            [2, 3, 8, 8],
            [2, 3, 4, 4],
            "kernel_size",
        ),
        (
            "max_pool2d",
            {"kernel_size": [2, 2], "stride": [0, 1], "padding": 0, "dilation": 1, "ceil_mode": False},
            [2, 3, 8, 8],
            [2, 3, 4, 4],
            "stride",
        ),
        (
            "max_pool3d",
            {"kernel_size": [2], "stride": [], "padding": 0, "dilation": 1, "ceil_mode": False},
            [8, 8, 8],
            [4, 4, 4],
            "at least 4 dims",
        ),
        (
            "avg_pool2d",
            {
                "kernel_size": [2, 2],
                "stride": [],
                "padding": 0,
                "ceil_mode": False,
                "count_include_pad": True,
                "divisor_override": 0,
            },
            [2, 3, 8, 8],
            [2, 3, 4, 4],
            "divisor_override",
        ),
        ("adaptive_avg_pool2d", {"output_size": [0, 3]}, [2, 3, 8, 8], [2, 3, 0, 3], "output_size"),
    ],
)
def test_refused(op, args, shape, out, why):
    with pytest.raises(kernels.NotSupported, match=why):
        kernels.emit(_hand_graph(op, args, shape, out, 1), "p", "k")


def test_refuses_other_dtypes():
    g = _hand_graph("adaptive_avg_pool2d", {"output_size": [2, 2]}, [2, 3, 8, 8], [2, 3, 2, 2], 1)
    g[0]["dtype"] = g[1]["dtype"] = "float64"
    with pytest.raises(kernels.NotSupported):
        kernels.emit(g, "p", "k")
    g[0]["dtype"] = g[1]["dtype"] = "int64"
    with pytest.raises(kernels.NotSupported, match="dtype"):
        kernels.emit(g, "p", "k")


# ---------------------------------------------------------------------------------------------
# On a GPU: the real launchers


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_torch(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    ks = _emit_all(monkeypatch)
    lib = kernels.library(ks, tmp_path)
    for case, k in zip(CASES, ks, strict=True):
        x = case.input(4).cuda()
        ref = case.reference(x)
        if case.channels_last:
            x, ref = _last(x), (_last(ref[0]), _last(ref[1]))
        outs = _buffers(case, ref, "cuda")
        lib.call(k.name, x, *outs)
        torch.cuda.synchronize()
        _check(case, outs, ref)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
