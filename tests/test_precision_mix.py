"""The mixed rung of the built-in coder's precision ladder (agents/coder/precision_mix.py): after a
TF32 miss, 3xTF32 only for the matmuls whose results feed exp or a softmax. Which matmuls those are,
where the rung is passed over, the ladder through it, and the emitted kernels: the scores' matmuls
split, the rest TF32."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import emit_gemm, precision_mix
from stitchcuda.agents.coder.model_new import CU_FILE
from stitchcuda.agents.plan import planner
from stitchcuda.types import FINITE_MISS, Finding, Task, Verdict

pytestmark = pytest.mark.usefixtures("isolated_cache")

ATTENTION = '''import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal self-attention as MinGPT writes it (level3/43's shape of graph, smaller)."""

    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T_, C_ = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T_, H, C // H).transpose(1, 2)
        q = q.view(B, T_, H, C // H).transpose(1, 2)
        v = v.view(B, T_, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
        att = att.masked_fill(self.bias[:, :, :T_, :T_] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T_, C_)
        return self.c_proj(y)


def get_inputs():
    return [torch.rand(2, T, C)]


def get_init_inputs():
    return []
'''


def _plan(module: nn.Module, inputs: list):
    return planner.plan_graph(graph.trace_module(module, inputs))


def _attention(tmp_path, t: int = 16, c: int = 32, h: int = 4) -> Task:
    src = tmp_path / f"attention_{t}_{c}_{h}.py"
    src.write_text(ATTENTION.replace("import math\n", f"import math\n\nT, C, H = {t}, {c}, {h}\n", 1))
    return Task(path=src)


def _named(plan, names: set[str]) -> list[str]:
    nodes = graph.by_name(plan.graph)
    return sorted(nodes[n]["op"] + ":" + n for n in names)


def test_the_matmuls_before_the_softmax_are_the_sensitive_ones(tmp_path, monkeypatch):
    monkeypatch.setenv(planner.FUSED_ATTENTION_ENV, "0")  # the chain as its three kernels
    plan = planner.plan(_attention(tmp_path))
    assert plan.supported, plan.unsupported
    some = precision_mix.sensitive(plan)
    # The qkv projection and q.kT feed the scores; att.v and the output projection do not.
    assert _named(plan, some) == ["addmm:addmm", "bmm:bmm"]
    assert precision_mix.library_calls(plan) == some | {"addmm_1", "bmm_1"}


def test_a_fused_attention_and_what_feeds_its_scores_are_sensitive(tmp_path, monkeypatch):
    """With the chain fused, its softmax is inside the node: the node (3xTF32 scores on the mixed
    rung) and the qkv projection that feeds its query and key are sensitive, the output projection
    is not."""
    monkeypatch.delenv(planner.FUSED_ATTENTION_ENV, raising=False)
    task = _attention(tmp_path)
    plan = planner.plan(task)
    some = precision_mix.sensitive(plan)
    assert _named(plan, some) == ["addmm:addmm", "sc_attention:bmm_1"]
    assert precision_mix.library_calls(plan) == some | {"addmm_1"}
    mixed = coder_builtin.code(task, plan, _miss("tf32"))
    assert mixed.precision == "mixed"
    assert any("3xTF32 scores" in n for n in mixed.notes), mixed.notes
    assert any("addmm 32x32x32" in n and "3xTF32" not in n for n in mixed.notes), mixed.notes


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


class LinearSoftmax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 16)

    def forward(self, x):
        return torch.softmax(self.a(x), dim=-1)


class ExpOfInput(nn.Module):
    """exp of the input, a matmul after it: the matmul is downstream, not upstream."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 4)

    def forward(self, x):
        return self.a(torch.exp(x))


class DeadSoftmax(nn.Module):
    """A softmax of a matmul computed and never used: no kernel computes it, so it counts for nothing
    (else the mixed rung would build TF32's files and end the ladder as nothing new)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(8, 4)

    def forward(self, x):
        torch.softmax(self.a(x), dim=-1)
        return self.b(x)


@pytest.mark.parametrize("make", [Mlp, LinearSoftmax, ExpOfInput, DeadSoftmax])
def test_the_rung_is_passed_over_where_it_would_build_another_rungs_files(make, monkeypatch):
    """No matmul feeds an amplifying op (Mlp, ExpOfInput: the mixed rung would be TF32's files), or
    every library call does (LinearSoftmax: 3xTF32's)."""
    monkeypatch.setenv(precision_mix.ENV, "1")
    plan = _plan(make(), [torch.randn(4, 8)])
    assert not precision_mix.applies(plan)
    assert (make is LinearSoftmax) == bool(precision_mix.sensitive(plan))
    assert precision_mix.sensitive(plan) <= precision_mix.library_calls(plan)


def _miss(precision: str) -> Verdict:
    return Verdict(candidate="c", status="incorrect", precision=precision,
                   findings=[Finding("output-mismatch", "m", data={FINITE_MISS: True})])


def test_the_ladder_climbs_through_the_mixed_rung_where_it_is_on(tmp_path, monkeypatch):
    monkeypatch.setenv(planner.FUSED_ATTENTION_ENV, "0")  # the chain as its three kernels
    monkeypatch.setattr(emit_gemm, "SMALL_PRODUCT", 0)  # (small products: the ladder itself is tested)
    task = _attention(tmp_path)
    plan = planner.plan(task)
    monkeypatch.setenv(precision_mix.ENV, "1")
    first = coder_builtin.code(task, plan, None)
    assert first.precision == "tf32" and "3xTF32" not in " ".join(first.notes)
    mixed = coder_builtin.code(task, plan, _miss("tf32"))
    assert mixed.precision == "mixed" and mixed.name.endswith("-mixed")
    split = [n for n in mixed.notes if "3xTF32" in n]
    tf32 = [n for n in mixed.notes if ("bmm " in n or "addmm " in n) and "3xTF32" not in n]
    # Two of the four matmuls split: the qkv projection (32 -> 96) and q.kT (... x 8 x 16); att.v
    # (16 x 8) and the output projection (32 -> 32) stay TF32.
    assert len(split) == 2 and len(tf32) == 2, mixed.notes
    assert any("addmm 32x32x96" in n for n in split) and any("addmm 32x32x32" in n for n in tf32), mixed.notes
    src = mixed.files[CU_FILE]
    # (Split as three calls or, where emit_gemm.packed_plan takes them, one over packed operands.)
    assert "rc = sc_tf32_" in src and "rc = sc_tf32_" not in first.files[CU_FILE]
    after = coder_builtin.code(task, plan, _miss("mixed"))
    assert after.precision == "3xtf32" and all("3xTF32" in n for n in after.notes if "bmm " in n or "addmm " in n)


def test_turned_off_the_ladder_goes_from_tf32_to_3xtf32(tmp_path, monkeypatch):
    monkeypatch.setenv(precision_mix.ENV, "0")
    task = _attention(tmp_path)
    plan = planner.plan(task)
    assert coder_builtin.code(task, plan, _miss("tf32")).precision == "3xtf32"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_the_mixed_candidate_meets_the_tolerance_on_large_inputs(tmp_path, monkeypatch):
    """The Verifier's x1000 inputs (sequence 128, width 128, 4 heads): the mixed candidate meets the
    tolerance (rtol 0.01, atol 0.01 x mean|ref|), no worse than the TF32 one, which a CPU emulation
    of TF32 operand rounding says misses it there (119 of 32768 elements)."""
    from conftest import load_model_new

    from stitchcuda.agents.coder import kernels
    from stitchcuda.agents.verify.compare import Tolerance, _compare_tensor
    from stitchcuda.task import load_task_module

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    task = _attention(tmp_path, 128, 128, 4)
    plan = planner.plan(task)
    _, cls = load_task_module(task)
    torch.manual_seed(0)
    module = cls().cuda()
    x = torch.rand(2, 128, 128, device="cuda") * 1e3
    with torch.no_grad():
        want = module(x)
    found = {}
    for level in (kernels.PRECISE_TF32, kernels.PRECISE_MIXED):
        cand = coder_builtin.build_candidate(plan, cls, title="t", precise=level)
        new, _ = load_model_new(cand, module, tmp_path / f"m{level}")
        with torch.no_grad():
            found[level] = _compare_tensor(want, new.cuda()(x), Tolerance(0.01, "tf32"), 0)
    mixed, tf32 = found[kernels.PRECISE_MIXED], found[kernels.PRECISE_TF32]
    assert mixed.ok, mixed.message
    assert mixed.max_abs <= tf32.max_abs, (mixed.message, tf32.message)
