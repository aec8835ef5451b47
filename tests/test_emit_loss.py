"""Loss emitters (nll_loss_forward, smooth_l1/huber/mse/l1): host entries against PyTorch on the CPU,
and the real launchers on a GPU where there is one."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from conftest import Fn, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_loss, kernels

pytestmark = pytest.mark.usefixtures("isolated_cache")


W = torch.rand(37, generator=torch.Generator().manual_seed(9)) + 0.1


def _ce_inputs(seed: int, rows: int = 300, ignore: int = -100) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 37, generator=g) * 30
    t = torch.randint(0, 37, (rows,), generator=g)
    t[::7] = ignore
    return [x, t]


def _pair(seed: int, shape=(7, 1001), dtype=torch.float32) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g) * 3
    b = torch.randn(shape, generator=g) * 3
    a.view(-1)[::13] *= 1e3
    return [a.to(dtype), b.to(dtype)]


CASES = [
    ("ce-mean", lambda x, t: F.cross_entropy(x, t), _ce_inputs),
    ("ce-sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"), _ce_inputs),
    ("ce-none", lambda x, t: F.cross_entropy(x, t, reduction="none"), _ce_inputs),
    ("ce-ignore", lambda x, t: F.cross_entropy(x, t, ignore_index=3), lambda s: _ce_inputs(s, ignore=3)),
    ("ce-weight", lambda x, t: F.cross_entropy(x, t, weight=W), _ce_inputs),
    ("ce-weight-sum", lambda x, t: F.cross_entropy(x, t, weight=W, reduction="sum"), _ce_inputs),
    ("ce-big", lambda x, t: F.cross_entropy(x, t), lambda s: _ce_inputs(s, 70001)),
    ("huber", lambda a, b: F.smooth_l1_loss(a, b), _pair),
    ("smooth-beta", lambda a, b: F.smooth_l1_loss(a, b, beta=0.3, reduction="sum"), _pair),
    ("smooth-none", lambda a, b: F.smooth_l1_loss(a, b, beta=2.0, reduction="none"), _pair),
    ("huber-delta", lambda a, b: F.huber_loss(a, b, delta=2.5), _pair),
    ("mse", lambda a, b: F.mse_loss(a, b), _pair),
    ("mse-none", lambda a, b: F.mse_loss(a, b, reduction="none"), _pair),
    ("mse-sum-odd", lambda a, b: F.mse_loss(a, b, reduction="sum"), lambda s: _pair(s, (3, 70001))),
    ("huber-fp16", lambda a, b: F.smooth_l1_loss(a, b), lambda s: _pair(s, (3, 333), torch.float16)),
]


def _emit(fn: Callable, xs: list[torch.Tensor], name: str) -> kernels.Kernel:
    g = graph.trace_module(Fn(fn), xs)
    node = next(n for n in g if n["op"] in emit_loss.EMITTERS)
    return emit_loss.EMITTERS[node["op"]](kernels.context(g, node["name"], name))


def _inputs_for(k: kernels.Kernel, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The kernel's inputs: log_softmax'd predictions for nll (the Planner runs _log_softmax first)."""
    if k.ops[0].startswith("nll"):
        out = [torch.log_softmax(xs[0].float(), dim=1).to(xs[0].dtype), xs[1]]
        return out + ([W] if "weighted" in k.ops[0] else [])
    return xs


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("STITCHCUDA_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("STITCHCUDA_ARCH", "sm_90")
    try:
        ks = [_emit(fn, make(0), f"loss{i}") for i, (_, fn, make) in enumerate(CASES)]
        return ks, kernels.library(ks, tmp_path_factory.mktemp("loss"))
    finally:
        mp.undo()


def _run(call: Callable, k: kernels.Kernel, xs: list[torch.Tensor], ref: torch.Tensor, device: str) -> list:
    ins = [x.to(device) for x in _inputs_for(k, xs)]
    outs = [torch.full(ref.shape, math.nan, dtype=ref.dtype, device=device)]
    if len(k.outputs) > 1:
        outs.append(torch.full((), math.nan, device=device))
    scratch = [torch.full((n,), math.nan, dtype=getattr(torch, d), device=device) for d, n in k.scratch]
    call(ins + outs + scratch)
    return outs


@needs_nvcc
@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_host_matches_torch(lib, i):
    ks, library = lib
    cid, fn, make = CASES[i]
    k = ks[i]
    for seed in (1, 2):
        xs = make(seed)
        ref = fn(*xs)

        def call(ts):
            assert library._fn(f"{k.name}_host")(*(ctypes.c_void_p(t.data_ptr()) for t in ts), None) == 0

        got = _run(call, k, xs, ref, "cpu")[0]
        tol = 1e-2 if ref.dtype == torch.float16 else 1e-4
        torch.testing.assert_close(got.double(), ref.double(), rtol=tol, atol=tol * 1e-3, msg=cid)


@needs_nvcc
def test_total_weight(lib):
    """nll_loss_forward's second result, where the graph reads it."""
    x, t = _ce_inputs(5)
    lp = torch.log_softmax(x, dim=1)
    fn = lambda p, t: torch.ops.aten.nll_loss_forward(p, t, W, 1, -100)  # noqa: E731
    k = _emit(fn, [lp, t], "tw")
    assert len(k.outputs) == 2
    out, tw = fn(lp, t)
    got = [torch.full((), math.nan), torch.full((), math.nan)]
    scratch = [torch.full((n,), math.nan, dtype=getattr(torch, d)) for d, n in k.scratch]
    kernels.run_host(k, [lp, t, W, *got, *scratch])
    torch.testing.assert_close(got[0], out, rtol=1e-5, atol=0)
    torch.testing.assert_close(got[1], tw, rtol=1e-5, atol=0)


def test_refuses():
    x, t = torch.randn(5), torch.tensor(2)
    with pytest.raises(kernels.NotSupported, match="2-d"):
        _emit(lambda x, t: F.nll_loss(x, t), [x, t], "r0")
    a = torch.randn(4, 5)
    with pytest.raises(kernels.NotSupported):
        _emit(lambda a, b: F.mse_loss(a, b), [a.double(), a.double()], "r1")


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_matches_torch(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    ks = [_emit(fn, make(0), f"lg{i}") for i, (_, fn, make) in enumerate(CASES)]
    library = kernels.library(ks, tmp_path)
    for (cid, fn, make), k in zip(CASES, ks, strict=True):
        xs = make(3)
        ref = fn(*xs)  # on the CPU: the class weights W live there
        got = _run(lambda ts, k=k: library.call(k.name, *ts), k, xs, ref, "cuda")[0]
        torch.cuda.synchronize()
        tol = 1e-2 if ref.dtype == torch.float16 else 1e-4
        torch.testing.assert_close(got.cpu().double(), ref.double(), rtol=tol, atol=tol * 1e-3, msg=cid)


# A cross-entropy head as a task file: its target reaches nll_loss alone (the Verifier's ignore-index set).
CE_REF = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
          "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
          "        self.scale = nn.Parameter(torch.rand(37) + 0.5)\n\n"
          "    def forward(self, x, t):\n        return F.cross_entropy(x * self.scale, t)\n\n\n"
          "def get_inputs():\n    return [torch.randn(300, 37), torch.randint(0, 37, (300,))]\n\n\n"
          "def get_init_inputs():\n    return []\n")


@pytest.mark.gpu
def test_on_the_gpu_the_built_in_cross_entropy_passes_the_ignore_index_set(tmp_path, isolated_cache):
    """The built-in candidate of a cross-entropy through the worker: the set with targets at -100
    (sentinels.py) runs on the GPU, in the candidate's kernel and the reference's, and passes."""
    ref = tmp_path / "ce_ref.py"
    ref.write_text(CE_REF)
    from stitchcuda.agents.coder import builtin
    from stitchcuda.agents.loop import plan_task
    from stitchcuda.agents.verify.verifier import VerifyOptions, verify
    from stitchcuda.types import Task

    task = Task(path=ref)
    cand = builtin.code(task, plan_task(task))
    assert cand is not None
    v = verify(task, cand, tmp_path / "v", VerifyOptions(timeout_s=300, trials=10, time_compile=False))
    assert v.status == "ok" and v.accepted, (v.status, v.message, v.log_tail[-1500:])
    assert any(c["set"] == "ignore-index" and c["ok"] for c in v.checks), v.checks
