"""Plans that mix pointwise groups with library/reduction kernels, and the candidates made from them.

The whole candidate (trace -> plan -> .cu + model_new.py) runs on CPU tensors through the kernels'
host entry points and is compared with the reference module; on a GPU the same modules run through
the real launchers (tests marked gpu).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import emit_gemm
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify.static_check import check_source
from stitchcuda.task import import_file
from stitchcuda.types import FINITE_MISS, Candidate

requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
_ids = itertools.count()


pytestmark = pytest.mark.usefixtures("isolated_cache")


def plan_of(module: nn.Module, inputs: list):
    return planner.plan_graph(graph.trace_module(module, inputs))


def run_candidate(module: nn.Module, inputs: list, folder: Path, *, host: bool):
    p = plan_of(module, inputs)
    assert p.supported, p.unsupported
    cand = coder_builtin.build_candidate(p, type(module), title="test", host=host)
    assert not check_source(cand.files[cand.module]), "generated ModelNew fails the static check"
    mod = import_file(cand.write(folder), name=f"_mixed_{next(_ids)}")
    new = mod.ModelNew()
    new.load_state_dict(module.state_dict())
    if not host:
        new = new.cuda()
    return new(*inputs), p, cand


class PoolChain(nn.Module):
    """pointwise -> max-pool -> pointwise: the pool reads a materialised prologue, and the
    epilogue reads the pool's result."""

    def forward(self, x):
        y = F.max_pool2d(torch.relu(x) * 2.0 - 1.0, kernel_size=3, stride=2, padding=1)
        return torch.tanh(y) + 0.5


class TwoPools(nn.Module):
    """Two independent kernels of one stage, and an output that is a pool result itself."""

    def forward(self, x):
        a = F.avg_pool2d(x, 2)
        b = F.max_pool2d(x, 2)
        return a, a * b


class PoolOfView(nn.Module):
    def forward(self, x):
        return F.max_pool1d(x.reshape(2, 5, 6), 2)


def test_kernels_and_pointwise_groups_are_ordered_by_stage(monkeypatch):
    # With prologues the pool computes relu(x) * 2 - 1 itself: one kernel, then the epilogue.
    assert [g.kind for g in plan_of(PoolChain(), [torch.randn(2, 3, 9, 9)]).groups] == ["kernel", "pointwise"]
    monkeypatch.setenv(planner.PROLOGUES_ENV, "0")
    p = plan_of(PoolChain(), [torch.randn(2, 3, 9, 9)])
    assert p.supported, p.unsupported
    assert [g.kind for g in p.groups] == ["pointwise", "kernel", "pointwise"]
    nodes = graph.by_name(p.graph)
    pool = p.groups[1]
    assert nodes[pool.nodes[0]]["op"] == "max_pool2d_with_indices"
    # The pool reads the prologue's stored result and writes only the values (indices unused).
    assert pool.inputs == p.groups[0].outputs
    assert len(pool.outputs) == 1 and nodes[pool.outputs[0]]["op"] == "getitem"
    assert p.groups[2].inputs == pool.outputs


def test_independent_kernels_share_a_stage():
    p = plan_of(TwoPools(), [torch.randn(2, 3, 8, 8)])
    assert p.supported, p.unsupported
    assert [g.kind for g in p.groups] == ["kernel", "kernel", "pointwise"]


def test_a_refused_kernel_is_reported_once_with_its_reason():
    class ManyLargest(nn.Module):
        def forward(self, x):
            return torch.topk(x, 40, dim=1).values * 2

    p = plan_of(ManyLargest(), [torch.randn(4, 5000)])  # (past a warp's 32, in rows past a block's sort)
    assert not p.supported
    assert p.unsupported == ["topk of 40 of 5000 (at most 32 of floats, or rows of at most 4096)"]


@pytest.mark.nvcc
@needs_nvcc
def test_a_pool_of_a_transposed_input_plans_and_matches_pytorch(tmp_path):
    """PyTorch lays the pool's result out as its transposed input is: stored row-major instead
    (agents/plan/fresh_layouts.py); it was refused before."""
    from conftest import planned_on_the_cpu

    class PoolOfTranspose(nn.Module):
        def forward(self, x):
            return F.max_pool1d(x.transpose(1, 2), 2) + 1

    x = torch.randn(2, 10, 3)
    _, new = planned_on_the_cpu(PoolOfTranspose(), [x], tmp_path)
    with torch.no_grad():
        for given in (x, torch.randn(2, 10, 3)):
            torch.testing.assert_close(new(given), PoolOfTranspose()(given))


def test_unsupported_op_is_still_reported():
    class PairwiseDistances(nn.Module):
        def forward(self, x):
            return torch.nn.functional.pdist(x) * 2

    p = plan_of(PairwiseDistances(), [torch.randn(4, 5)])
    assert not p.supported
    assert any("pdist" in r for r in p.unsupported), p.unsupported


@needs_nvcc
@pytest.mark.parametrize(
    "module, inputs",
    [
        (PoolChain(), [torch.randn(2, 3, 9, 9) * 3]),
        (TwoPools(), [torch.randn(2, 3, 8, 8)]),
        (PoolOfView(), [torch.randn(2, 10, 3)]),
    ],
    ids=["pool-chain", "two-pools", "pool-of-view"],
)
def test_mixed_candidate_matches_reference_on_cpu(tmp_path, module, inputs):
    ours, _, cand = run_candidate(module, inputs, tmp_path, host=True)
    ref = module(*inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("module, shape", [(PoolChain(), (4, 8, 33, 33)), (TwoPools(), (4, 8, 32, 32))])
def test_mixed_candidate_matches_reference_on_gpu(tmp_path, module, shape):
    x = torch.randn(*shape, device="cuda")
    ours, _, _ = run_candidate(module.cuda(), [x], tmp_path, host=False)
    ref = module(x)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b)


class Layouts(nn.Module):
    """cat (of an input, a computed tensor and a view), flip, triu/tril and padding."""

    def forward(self, x, y):
        a = torch.cat([x, torch.relu(y), x.flip(1)], dim=1)
        t = torch.triu(x[:, :, :4], diagonal=1) + torch.tril(x[:, :, :4], diagonal=-1) * 2
        p = F.pad(y, (1, 2, 0, 3), value=-1.5)
        s = torch.stack([x, y * 3], dim=2)
        return a * 2, t, p, s


def test_layout_ops_plan_as_kernels():
    p = plan_of(Layouts(), [torch.randn(2, 4, 5), torch.randn(2, 4, 5)])
    assert p.supported, p.unsupported
    ops = [graph.by_name(p.graph)[g.nodes[0]]["op"] for g in p.groups if g.kind == "kernel"]
    assert sorted(ops) == ["cat", "constant_pad_nd", "flip", "stack", "tril", "triu"]


@needs_nvcc
def test_layout_candidate_matches_reference_on_cpu(tmp_path):
    module, inputs = Layouts(), [torch.randn(2, 4, 5), torch.randn(2, 4, 5)]
    ours, _, _ = run_candidate(module, inputs, tmp_path, host=True)
    for a, b in zip(ours, module(*inputs), strict=True):
        torch.testing.assert_close(a, b)


class ConvAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.conv2 = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.conv2(y)


def test_conv_bias_moves_into_the_following_pointwise_kernel(monkeypatch):
    p = plan_of(ConvAct(), [torch.randn(2, 3, 10, 10)])
    assert p.supported, p.unsupported
    nodes = graph.by_name(p.graph)
    convs = [n for n in p.graph if n["op"] == "convolution"]
    # The first conv feeds relu: its bias is added there. The second is the output: cuDNN adds it.
    assert convs[0]["args"]["bias"] is None
    assert convs[1]["args"]["bias"] == {"ref": "conv2.bias"}
    # (The first conv's result stays channels-last into the second, so its bias and relu run as its
    # epilogue; with the chain off, as a pointwise kernel of their own.)
    relu_group = next(g for g in p.groups if g.nodes[0] == convs[0]["name"])
    assert relu_group.note.endswith("epilogue add -> relu (cuDNN runtime fusion or an implicit GEMM where it wins)"), relu_group.note
    assert "conv.bias" in relu_group.inputs
    monkeypatch.setenv(planner.CONV_CHAIN_ENV, "0")
    p = plan_of(ConvAct(), [torch.randn(2, 3, 10, 10)])
    nodes = graph.by_name(p.graph)
    relu_group = next(g for g in p.groups if g.kind == "pointwise")
    ops = [nodes[n]["op"] for n in relu_group.nodes if not nodes[n].get("view")]
    assert ops == ["add", "relu"]
    assert "conv.bias" in relu_group.inputs


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.conv = nn.Conv1d(8, 4, 1)

    def forward(self, x):
        return self.conv(torch.relu(self.fc(x)).unsqueeze(-1))


def test_feedback_after_a_wrong_result_makes_matmul_3xtf32(tmp_path, monkeypatch):
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # (a small Linear: the ladder itself is tested)
    from stitchcuda.types import Finding, Task, Verdict

    src = tmp_path / "lin.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(16, 8)\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n"
        "def get_inputs():\n    return [torch.randn(4, 16)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    task = Task(src)
    p = planner.plan(task)
    first = coder_builtin.code(task, p)
    assert "CUBLAS_COMPUTE_32F_FAST_TF32" in first.files["fused_kernels.cu"]
    same = coder_builtin.code(task, p, feedback=Verdict(candidate=first.name, status="hacked", batch=first.batch))
    assert same.files == first.files
    def wrong(cand) -> Verdict:
        # The Verifier copies the candidate's precision into its verdict; the finding is marked as a
        # miss on finite values, the one more precision can mend.
        return Verdict(candidate=cand.name, status="incorrect", precision=cand.precision, batch=cand.batch,
                       findings=[Finding("output-mismatch", MISS, data={FINITE_MISS: True})])

    assert first.precision == "tf32"
    second = coder_builtin.code(task, p, feedback=wrong(first))
    assert second.precision == "3xtf32" and second.name.endswith("-fp32")
    cu = second.files["fused_kernels.cu"]
    assert "sc_tf32_split(" in cu and cu.count("cublasGemmEx(") == 3  # three products, split operands
    assert "cublasLtMatmul(" not in cu  # the bias is copied in before the products accumulate
    assert any("3xTF32" in n for n in second.notes)
    # 3xTF32 wrong too (on the H100 its error reached 13x fp32's with K = 8192): full fp32, no split.
    # The level comes from the verdict's precision field, whatever the candidate is called.
    for name in ("anything", "r2-" + second.name):
        renamed = Candidate(name, second.files, precision=second.precision, batch=second.batch)
        third = coder_builtin.code(task, p, feedback=wrong(renamed))
        assert third.precision == "fp32" and third.name.endswith("-fp32full")
        cu3 = third.files["fused_kernels.cu"]
        assert "sc_tf32_split" not in cu3 and "FAST_TF32" not in cu3 and "CUBLAS_COMPUTE_32F," in cu3
        assert any("no TF32" in n for n in third.notes)
    # Nothing above full fp32: the same files again, which ends the rounds.
    last = coder_builtin.code(task, p, feedback=wrong(third))
    assert last.files == third.files
    # A right answer at any level resets to TF32: the same files as the first round.
    ok = coder_builtin.code(task, p, feedback=Verdict(candidate=third.name, status="ok", precision="fp32",
                                                      batch=third.batch))
    assert ok.files == first.files


MISS = "random-0: output 0: 12 of 4096 elements beyond tolerance (rtol 0.01); max |diff| 0.02"
MARKED = {FINITE_MISS: True}


def test_precision_ladder_levels():
    from stitchcuda.agents.coder import kernels
    from stitchcuda.types import Finding, Verdict

    def after(precision: str, status: str = "incorrect",
              findings: tuple[tuple[str, dict], ...] = (("output-mismatch", MARKED),)) -> int:
        return coder_builtin.precision_after(Verdict(candidate="c", status=status, precision=precision,
                                                     findings=[Finding(c, "m", data=d) for c, d in findings]))

    assert coder_builtin.precision_after(None) == kernels.PRECISE_TF32
    # (code() passes over the mixed rung where it is off or builds nothing of its own: test_precision_mix.py.)
    assert after("tf32") == kernels.PRECISE_MIXED
    assert after("mixed") == kernels.PRECISE_SPLIT
    assert after("3xtf32") == kernels.PRECISE_FP32
    assert after("fp32") == kernels.PRECISE_FP32
    assert after("3xtf32", "hacked") == after("3xtf32", "ok") == kernels.PRECISE_TF32
    # Wrong in ways more precision cannot mend: the same level again (the same files end the rounds).
    nan = (("output-mismatch", {FINITE_MISS: False}),)
    assert after("tf32", findings=nan) == kernels.PRECISE_TF32
    assert after("3xtf32", findings=nan) == kernels.PRECISE_SPLIT
    written = (("output-mismatch", MARKED), ("mutates-input", {}))
    assert after("tf32", findings=written) == kernels.PRECISE_TF32
    # The name and the message say nothing to the ladder: only the fields do.
    named = Verdict(candidate="r2-builtin-fp32", status="incorrect", findings=[Finding("output-mismatch", MISS)])
    assert coder_builtin.precision_after(named) == kernels.PRECISE_TF32


def test_a_few_integer_elements_off_is_a_miss_more_precision_may_mend():
    """argmax's near-ties after TF32 work (bench/coverage's flip_tta_segmentation: 1-93 of 65,536
    elements off at TF32, the ladder never climbed): marked for the ladder, as a finite miss is; an
    integer output off everywhere, or NaN where the reference has none, is not."""
    from stitchcuda.agents.verify.compare import Tolerance, compare_outputs, mendable_miss

    tol = Tolerance(1e-2, "conv")
    ref = torch.arange(65536) % 19
    ties = ref.clone()
    ties[:2] = (ties[:2] + 1) % 19
    assert mendable_miss(compare_outputs([ref], [ties], tol))
    assert not mendable_miss(compare_outputs([ref], [(ref + 1) % 19], tol))  # every element off: no near-tie
    assert not mendable_miss(compare_outputs([ref], [ref.clone()], tol))  # (a match is no miss)
    x = torch.ones(64)
    assert not mendable_miss(compare_outputs([x], [torch.full((64,), float("nan"))], tol))
    off = x.clone()
    off[0] = 2.0
    assert mendable_miss(compare_outputs([x], [off], tol))  # (finite values off: as before)


def test_precise_convolution_asks_cudnn_for_fma_math():
    plan = plan_of(Linear(), [torch.randn(4, 16)])
    assert plan.supported, plan.unsupported
    tf32 = coder_builtin.build_candidate(plan, Linear, title="t")
    exact = coder_builtin.build_candidate(plan, Linear, title="t", precise=coder_builtin.kernels.PRECISE_SPLIT)

    def precise_field(cand) -> str:  # sc_conv_spec's last fields: ..., precise, y_nhwc
        spec = [ln for ln in cand.files["fused_kernels.cu"].splitlines() if "static const sc_conv_spec spec" in ln]
        assert spec
        return spec[0].rstrip().rstrip("};").split(",")[-2].strip()

    assert precise_field(exact) == "1"
    assert precise_field(tf32) == "0"


class Splits(nn.Module):
    def forward(self, x):
        a, b, c = x.split([2, 3, 1], dim=1)
        p, q = x.chunk(2, dim=0)
        rows = x.unbind(2)
        return torch.relu(a) + b[:, :2], torch.cat([c, c], 1) * 2, p - q, rows[0] * rows[3]


def test_split_chunk_unbind_results_are_views():
    p = plan_of(Splits(), [torch.randn(4, 6, 5)])
    assert p.supported, p.unsupported
    ops = {graph.by_name(p.graph)[n]["op"] for g in p.groups for n in g.nodes}
    assert not ops & {"split_with_sizes", "split", "chunk", "unbind"}


@needs_nvcc
def test_split_candidate_matches_reference_on_cpu(tmp_path):
    module, inputs = Splits(), [torch.randn(4, 6, 5)]
    ours, _, _ = run_candidate(module, inputs, tmp_path, host=True)
    for a, b in zip(ours, module(*inputs), strict=True):
        torch.testing.assert_close(a, b)


class SplitOfGemm(nn.Module):
    """A split of a library kernel's result: its pieces are views, not results of the kernel."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 12)

    def forward(self, x):
        a, b, c = self.fc(x).chunk(3, dim=1)
        return torch.sigmoid(a) * torch.tanh(b) + c


def test_split_of_a_kernel_result_is_a_view_of_it():
    p = plan_of(SplitOfGemm(), [torch.randn(5, 8)])
    assert p.supported, p.unsupported
    assert [g.kind for g in p.groups] == ["kernel", "pointwise"]
