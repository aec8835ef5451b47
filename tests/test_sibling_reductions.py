"""Sibling reductions in one pass (agents/plan/sibling_reductions.py, emit_reduce.emit_siblings): two
reductions over rows of one layout that read a tensor in common become one kernel whose loader
computes both operands, so the shared tensor is read once (level 1's TripletMarginLoss: two norms,
each of anchor minus another tensor). Whole candidates run on CPU tensors through the host entries,
which run the kernels' per-thread parts, group merges and split merges serially."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc, on_the_gpu, plan_of

from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import emit_reduce
from stitchcuda.agents.coder.model_new import CU_FILE
from stitchcuda.task import import_file

pytestmark = pytest.mark.usefixtures("isolated_cache")
_ids = itertools.count()


class Triplet(nn.Module):
    def __init__(self, margin: float = 1.0, p: float = 2.0):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=margin, p=p)

    def forward(self, a, p, n):
        return self.loss(a, p, n)


class MaxAndDot(nn.Module):
    """A plain reduction of a stored input beside a prologue that reads it: x.amax(-1) and (x * y).sum(-1)."""

    def forward(self, x, y):
        return x.amax(-1) + (x * y).sum(-1)


class HalfMeans(nn.Module):
    """fp16 operands: each component is rounded to fp16 as storing it would round it."""

    def forward(self, x, y):
        return (x * 3.0).mean(-1, dtype=torch.float32) - (x - y).abs().mean(-1, dtype=torch.float32)


class StdAndNorm(nn.Module):
    """Welford's state beside a sum's double state (a pair of unequal states)."""

    def forward(self, x, y):
        return torch.stack([(x + y).std(-1), (x - y).norm(dim=-1)])


class Cosine(nn.Module):
    def forward(self, x, y):
        return F.cosine_similarity(x, y, dim=-1)


def _plan(module, inputs):
    p = plan_of(module, inputs)
    assert p.supported, p.unsupported
    return p


def _pairs(p):
    return [g for g in p.groups if g.kind == "kernel" and g.detail.get("siblings")]


CASES = [
    (Triplet(), [torch.rand(6, 300) * 0.5, torch.rand(6, 300), torch.rand(6, 300)]),
    # 3 rows of 40,000: few outputs, so each row is split and the pair's states merged by sc_red_final.
    # (The negative near the anchor: the loss is then a distance, not the difference of two nearly
    # equal ones that fp32's rounding of each would dominate.)
    (Triplet(margin=0.3, p=1.0), [A3 := torch.rand(3, 40000), torch.rand(3, 40000), A3 + 0.01 * torch.rand(3, 40000)]),
    (MaxAndDot(), [torch.randn(5, 333), torch.randn(5, 333)]),
    (HalfMeans(), [torch.randn(4, 96).half(), torch.randn(4, 96).half()]),
    (StdAndNorm(), [torch.randn(7, 130), torch.randn(7, 130)]),
]
IDS = ["triplet", "triplet-split-l1", "max-and-dot", "fp16-means", "std-and-norm"]


def test_a_triplet_loss_reads_the_anchor_once():
    p = _plan(*CASES[0])
    (pair,) = _pairs(p)
    assert len(pair.nodes) == 2 and len(pair.outputs) == 2
    # anchor, positive and negative once each; the two norms alone would read four tensors.
    assert len(pair.inputs) == 3, pair.inputs
    assert all(o["members"] for o in pair.detail["siblings"])


@pytest.mark.parametrize(("module", "inputs"), CASES, ids=IDS)
def test_every_case_is_planned_as_a_pair(module, inputs):
    assert len(_pairs(_plan(module, inputs))) == 1


def test_siblings_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(emit_reduce.SIBLINGS_ENV, "0")
    p = _plan(*CASES[0])
    assert not _pairs(p)
    assert sum(1 for g in p.groups if g.kind == "kernel" and "norm" in g.note) == 2


class NothingShared(nn.Module):
    def forward(self, x, y):
        return x.sum(-1) + y.amax(-1)


class OtherLayouts(nn.Module):
    def forward(self, x):
        return x.sum(-1).sum() + x.amax(0).sum()


class Dependent(nn.Module):
    """The second reduction reads the first's result: stages apart, never one pass."""

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        return ((x - m) ** 2).sum(-1)


class WithIndices(nn.Module):
    def forward(self, x):
        v, i = x.max(-1)
        return v + x.sum(-1), i


@pytest.mark.parametrize("module", [NothingShared(), OtherLayouts(), Dependent(), WithIndices()],
                         ids=["nothing-shared", "other-layouts", "dependent", "indices"])
def test_reductions_that_gain_nothing_or_cannot_pair_stay_apart(module):
    x = torch.randn(6, 64)
    inputs = [x, torch.randn(6, 64)] if isinstance(module, NothingShared) else [x]
    assert not _pairs(_plan(module, inputs))


def _run_on_cpu(module, inputs, folder):
    p = _plan(module, inputs)
    cand = coder_builtin.build_candidate(p, type(module), title="test", host=True)
    new = import_file(cand.write(folder), name=f"_siblings_{next(_ids)}").ModelNew()
    new.load_state_dict(module.state_dict())
    ours, ref = new(*inputs), module(*inputs)
    return (ours if isinstance(ours, tuple) else (ours,)), (ref if isinstance(ref, tuple) else (ref,))


def _assert_close(ours, ref, tol: float) -> None:
    """Each result within `tol`, relative and of the reference's largest magnitude."""
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol * float(b.abs().max()))


@needs_nvcc
@pytest.mark.parametrize(("module", "inputs"), [*CASES, (Cosine(), [torch.randn(5, 70), torch.randn(5, 70)])],
                         ids=[*IDS, "cosine"])
def test_candidates_match_the_reference_on_cpu(tmp_path, module, inputs):
    _assert_close(*_run_on_cpu(module, inputs, tmp_path), 1e-5)


@needs_nvcc
def test_the_pair_computes_each_reduction_on_its_own_operand(tmp_path):
    """Swapping what the two results come from would pass a symmetric check: the distances here differ
    by orders of magnitude, and each must come out where the reference puts it."""

    class TwoNorms(nn.Module):
        def forward(self, a, p, n):
            return torch.stack([(a - p).norm(dim=-1), (a - n).abs().sum(-1)])

    a = torch.rand(4, 256)
    inputs = [a, a + 1e-3 * torch.rand(4, 256), a + 10.0 * torch.rand(4, 256)]
    ours, ref = _run_on_cpu(TwoNorms(), inputs, tmp_path)
    assert len(_pairs(_plan(TwoNorms(), inputs))) == 1
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=1e-7)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("module", "inputs"), CASES, ids=IDS)
def test_candidates_match_the_reference_on_the_gpu(tmp_path, module, inputs):
    _assert_close(*on_the_gpu(module, inputs, tmp_path), 1e-4)


@needs_nvcc
def test_the_pairs_build_for_sm90_without_warnings(tmp_path):
    """The device kernels (two states shuffled and merged through shared memory, vector loaders of
    sc_red_f2) are not the host entries' code: nvcc must take them for the GPU too."""
    from stitchcuda import runtime

    for k, (module, inputs) in enumerate(CASES):
        cand = coder_builtin.build_candidate(_plan(module, inputs), type(module), title="test", host=False)
        src = tmp_path / f"k{k}.cu"
        src.write_text(cand.files[CU_FILE])
        result = runtime.build([src], arch="sm_90")
        assert result.library.exists() and "warning" not in result.log.lower(), result.log


# bench/coverage modules whose plans take sibling pairs: a spatial attention's mean and max over
# channels, an RL loss's mean and std, a feature normalisation's mean and std, a zoo of norms
# (views of one input among them), a triplet loss. (MelGAN's discriminator paired the weight norms it
# computed twice, for the real and the generated waveform, until common_values computed each once.)
COVERAGE = Path(__file__).resolve().parent.parent / "bench" / "coverage"
COVERAGE_PAIRS = ["cbam.py", "ppo_loss_categorical.py", "specaugment_deltas_cmvn.py", "norms_distances_zoo.py",
                  "triplet_loss.py"]


def _random_args(kernel, nodes, made):
    """Random tensors for a kernel's inputs (one per graph tensor, shared across kernels through
    `made`), zeroed outputs and scratch, in launcher order."""
    for a in kernel.inputs:
        if a.name not in made:
            node = nodes[a.name]
            dt = getattr(torch, node["dtype"])
            gen = torch.Generator().manual_seed(len(made))
            made[a.name] = (torch.randn(node["shape"], generator=gen).to(dt) if dt.is_floating_point
                            else torch.randint(0, 2, node["shape"], generator=gen).to(dt))
    outs = [torch.zeros(nodes[a.name]["shape"], dtype=getattr(torch, nodes[a.name]["dtype"])) for a in kernel.outputs]
    return [made[a.name] for a in kernel.inputs], outs, [torch.zeros(n, dtype=getattr(torch, d)) for d, n in kernel.scratch]


@needs_nvcc
@pytest.mark.parametrize("file", COVERAGE_PAIRS)
def test_pairs_in_modules_users_write_equal_their_two_kernels_apart(file):
    """Each pair's kernel against the two kernels it replaces (each with its own prologue), host
    entries on the same random operands: the same per-thread order of elements, so the same bits."""
    from stitchcuda.agents.coder import codegen, kernels
    from stitchcuda.agents.graph import by_name, picks
    from stitchcuda.agents.loop import plan_task
    from stitchcuda.task import find_task

    p = plan_task(find_task(COVERAGE / file))
    groups = [g for g in p.groups if g.detail.get("siblings")]
    assert groups, f"{file}: no sibling pair planned"
    nodes, getitems = by_name(p.graph), picks(p.graph)
    live = {n for g in p.groups for n in g.outputs}
    for g in groups:
        operands = g.detail["siblings"]
        pair = emit_reduce.emit_siblings(p.graph, g.nodes, "pair", [(o["members"], o["node"]) for o in operands],
                                         live=live, getitems=getitems, nodes=nodes)
        made: dict[str, torch.Tensor] = {}
        ins, outs, scratch = _random_args(pair, nodes, made)
        kernels.run_host(pair, [*ins, *outs, *scratch])
        got = {a.name: t for a, t in zip(pair.outputs, outs, strict=True)}
        assert len(got) == 2
        for k, (name, o) in enumerate(zip(g.nodes, operands, strict=True)):
            pro = codegen.prologue(p.graph, o["members"], o["node"], nodes=nodes) if o["members"] else None
            single = kernels.emit(p.graph, name, f"single{k}", live=live, getitems=getitems, nodes=nodes, prologue=pro)
            s_ins, s_outs, s_scratch = _random_args(single, nodes, made)
            kernels.run_host(single, [*s_ins, *s_outs, *s_scratch])
            for a, t in zip(single.outputs, s_outs, strict=True):
                assert torch.equal(got[a.name], t), (file, g.nodes, a.name)
