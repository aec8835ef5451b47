"""The Planner's attention pass (planner.fuse_attention) on traced graphs of attention written by
hand: each chain becomes one sc_attention kernel node, and chains whose scores or probabilities are
used elsewhere (or whose head the kernel refuses) stay as they were."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import KERNELBENCH
from torch._subclasses.fake_tensor import FakeTensorMode

from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_attention
from stitchcuda.agents.graph import ref_name
from stitchcuda.agents.plan import planner
from stitchcuda.target import Target

H100 = Target.named("h100")
pytestmark = pytest.mark.usefixtures("fused_attention_on")
# What the chain is made of before the pass: none of it may be left in a fused plan.
CHAIN_OPS = {"bmm", "_softmax", "_safe_softmax", "logsumexp", "masked_fill"}


class Attn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, q, k, v, *extra):
        return self.fn(q, k, v, *extra)


class CausalBuffer(nn.Module):
    """MinGPT's masking: a tril buffer sliced to the sequence, masked_fill where it is 0."""

    def __init__(self, n: int):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, q, k, v):
        t = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v


def _plain(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1])), dim=-1) @ v


def _causal_tril(q, k, v):
    s = q.shape[-2]
    mask = torch.tril(torch.ones(s, s, dtype=torch.bool))
    att = torch.matmul(q, k.transpose(-1, -2)) / 8.0
    return torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1) @ v


def _qkv(shape=(2, 4, 33, 64), dtype=torch.float32) -> list[torch.Tensor]:
    return [torch.randn(shape).to(dtype) for _ in range(3)]


def _plan(module: nn.Module, inputs: list[torch.Tensor]):
    return planner.plan_graph(graph.trace_module(module, inputs), target=H100)


def _attention(p) -> list[dict]:
    return [n for n in p.graph if n["op"] == emit_attention.OP]


def _live_ops(p) -> set[str]:
    """Ops that some kernel of the plan computes (or that left the plan unsupported)."""
    names = {n for g in p.groups for n in g.nodes}
    return {n["op"] for n in p.graph if n["name"] in names}


class RelPosTerms(nn.Module):
    """Decomposed relative positions as SAM adds them, here as learned terms per head ([H, q_h, q_w,
    k_h] and [.., k_w], so the batch stays free) added to the scores viewed as [B, H, q_h, q_w, k_h,
    k_w] (a 4 x 5 window). SAM's own, made from q, are in test_emit_attention."""

    def __init__(self, heads: int):
        super().__init__()
        self.rel_h = nn.Parameter(torch.randn(heads, 4, 5, 4))
        self.rel_w = nn.Parameter(torch.randn(heads, 4, 5, 5))

    def forward(self, q, k, v):
        b, h, s, _ = q.shape
        att = (q * 0.25) @ k.transpose(-2, -1)
        att = att.view(b, h, 4, 5, 4, 5) + self.rel_h[:, :, :, :, None] + self.rel_w[:, :, :, None, :]
        return torch.softmax(att.view(b, h, s, s), dim=-1) @ v


FUSED = [
    ("plain", Attn(_plain), _qkv(), [["scale"]]),
    ("sdpa", Attn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), _qkv(), [["scale"]]),
    ("sdpa-causal", Attn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)), _qkv(),
     [["scale"], ["causal", 0]]),
    ("sdpa-scale-bool-mask",
     Attn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5)),
     [*_qkv(), torch.rand(33, 33) > 0.5], [["scale"], ["add"]]),
    ("masked-fill-tril", Attn(_causal_tril), _qkv(), [["scale"], ["causal", 0]]),
    ("masked-fill-buffer", CausalBuffer(40), _qkv(), [["scale"], ["fill"]]),
    ("3d-bmm", Attn(lambda q, k, v: torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)), -1), v)),
     _qkv((6, 20, 32)), []),
    ("fp16", Attn(_plain), _qkv(dtype=torch.float16), [["scale"]]),
    ("decomposed-relpos", RelPosTerms(3), _qkv((2, 3, 20, 16)),
     [["scale"], ["add", 0, [2, 3, 4, 5, 4, 5]], ["add", 1, [2, 3, 4, 5, 4, 5]]]),
    ("bf16-sdpa-causal",
     Attn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
     _qkv(dtype=torch.bfloat16), [["scale"], ["causal", 0]]),
]


@pytest.mark.parametrize("case", FUSED, ids=[c[0] for c in FUSED])
def test_chain_becomes_one_attention_kernel(case):
    _, module, inputs, steps = case
    p = _plan(module, inputs)
    assert not p.unsupported, p.unsupported
    (node,) = _attention(p)
    assert [s[: len(want)] for s, want in zip(node["args"]["steps"], steps, strict=True)] == steps
    kernel_groups = [g for g in p.groups if g.kind == "kernel"]
    assert [g.nodes for g in kernel_groups] == [[node["name"]]]
    assert not (_live_ops(p) & CHAIN_OPS), _live_ops(p)
    # SDPA's math path upcasts fp16/bf16 to fp32: the kernel reads the inputs themselves.
    if inputs[0].dtype != torch.float32:
        assert {ref_name(node["args"][k]) for k in ("query", "value")} <= {"q", "k", "v"}


def test_scale_is_the_product_of_every_scaling():
    """SDPA scales q and kᵀ by sqrt(scale) each (folded into the first product's alpha on the way):
    the node's scale steps multiply to the scale itself."""
    p = _plan(Attn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3)), _qkv())
    (node,) = _attention(p)
    total = math.prod(s[1] for s in node["args"]["steps"] if s[0] == "scale")
    assert total == pytest.approx(0.3, rel=1e-6)
    assert node["args"]["safe"] is True


def test_mingpt_reads_the_heads_in_place():
    """level3/43 (KernelBench's MinGPT attention): one attention node whose q, kᵀ and v are the
    head views of the qkv projection (no contiguous copies made for them); the buffer mask stays a
    mask operand, since its values are not known when planning."""
    path = KERNELBENCH / "level3" / "43_MinGPTCausalAttention.py"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    spec = importlib.util.spec_from_file_location("mingpt", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.Model(64, 2, 0.0, 0.0, 32)
    p = _plan(model, [torch.randn(2, 16, 64)])
    assert not p.unsupported, p.unsupported
    (node,) = _attention(p)
    nodes = graph.by_name(p.graph)
    for key in ("query", "key", "value"):
        src = nodes[ref_name(node["args"][key])]
        assert src["op"] == "transpose", (key, src["op"])  # [B, T, H, D] -> [B, H, T, D], in place
    assert [s[0] for s in node["args"]["steps"]] == ["scale", "fill"]
    assert not (_live_ops(p) & CHAIN_OPS)
    assert "clone" not in {nodes[n]["op"] for g in p.groups for n in g.nodes if g.kind == "kernel"}


def test_mingpt_at_its_own_size():
    """The same file at KernelBench's sizes (fake tensors: nothing allocated)."""
    path = KERNELBENCH / "level3" / "43_MinGPTCausalAttention.py"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    from stitchcuda.types import Task

    p = planner.plan(Task(path=path), target=H100)
    assert not p.unsupported, p.unsupported
    (node,) = _attention(p)
    assert node["shape"] == [128 * 8, 512, 96]


def _score_returned(q, k, v):
    att = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return att @ v, att


def _scores_reused(q, k, v):
    s = q @ k.transpose(-2, -1)
    return torch.softmax(s, dim=-1) @ v + s.mean()


def _softmax_not_last(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v


def _dropout_training(q, k, v):
    return F.dropout(torch.softmax(q @ k.transpose(-2, -1), dim=-1), p=0.1, training=True) @ v


UNFUSED = [
    ("probabilities-returned", _score_returned),
    ("scores-reused", _scores_reused),
    ("softmax-over-queries", _softmax_not_last),
    ("training-dropout", _dropout_training),
]


@pytest.mark.parametrize("case", UNFUSED, ids=[c[0] for c in UNFUSED])
def test_chain_used_elsewhere_stays_unfused(case):
    _, fn = case
    p = _plan(Attn(fn), _qkv())
    assert not _attention(p)
    assert "bmm" in {n["op"] for n in p.graph}


class _FlatBias(nn.Module):
    """A bias over the scores flattened to 1-D: no step of rank 2 or more (a review's case, 2026-12-04)."""

    def __init__(self, n: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, q, k, v):
        b, h, s, _ = q.shape
        return torch.softmax(((q @ k.transpose(-2, -1)).view(-1) + self.bias).view(b, h, s, s), dim=-1) @ v


class _Enlarged(nn.Module):
    """A mask with a dim the scores lack, added over a regrouping view: twice the elements, so the
    softmax's rows are no longer the products' (a review's case, 2026-12-04)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("m", torch.tensor([0.0, 5.0]).view(1, 1, 2, 1))

    def forward(self, q, k, v):
        b, h, s, _ = q.shape
        att = (q @ k.transpose(-2, -1)).view(b * h, s, 1, s) + self.m
        return torch.softmax(att.view(b * h, 2 * s, s), dim=-1) @ v.reshape(b * h, s, -1)


@pytest.mark.parametrize("module", [_FlatBias(2 * 8 * 8), _Enlarged()], ids=["1-d", "enlarged"])
def test_a_step_that_is_not_over_the_scores_elements_stays_unfused(module):
    """Fused, the kernel would refuse them and leave the whole plan unsupported: they stay as written."""
    p = _plan(module, [torch.randn(1, 2, 8, 16) for _ in range(3)])
    assert p.supported, p.unsupported
    assert not _attention(p)


class PaddingFromIds(nn.Module):
    """A key padding mask made in forward from each sample's token ids (BERT-style): a mask that
    carries the batch first, as q, k and v do."""

    def forward(self, q, k, v, ids):
        att = (q @ k.transpose(-2, -1)) * 0.25
        att = att.masked_fill((ids == 0)[:, None, None, :], float("-inf"))
        return torch.softmax(att, dim=-1) @ v


def _ids(n: int) -> torch.Tensor:
    ids = torch.randint(0, 5, (n, 20))
    ids[:, 0] = 1  # every row keeps a key
    return ids


def test_masks_that_carry_the_batch_first_keep_it_dynamic():
    """A mask made per sample (a padding mask from token ids) carries the batch first in q's row
    blocks: the module still serves any batch (before, any batch-carrying mask made it fixed-size),
    and its rendered math matches the module there."""
    from stitchcuda.agents.coder.batch import analyse
    from stitchcuda.agents.coder.reference_math import render_reference

    module = PaddingFromIds()
    p = _plan(module, [*_qkv((2, 3, 20, 16)), _ids(2)])
    assert len(_attention(p)) == 1
    info = analyse(p.graph)
    assert info.dynamic, info.reason
    tensors = [n for n in p.graph if n["op"] == "input" and "shape" in n]
    (out,) = [n for n in p.graph if n["op"] == "output"]
    ref = render_reference(p.graph, [n["name"] for n in tensors], [], [ref_name(v) for v in out["args"]["values"]],
                           batch=info)
    space: dict = {"torch": torch}
    exec(compile(ref.text, "<reference>", "exec"), space)  # noqa: S102 - the rendered plan
    for n in (1, 5):
        args = [*(torch.randn(n, 3, 20, 16) for _ in range(3)), _ids(n)]
        (got,) = space["_reference"]([args[t["index"]] for t in tensors], [])
        torch.testing.assert_close(got, module(*args).reshape(got.shape), rtol=1e-5, atol=1e-5)


def test_a_chain_its_kernel_refuses_is_planned_unfused(monkeypatch):
    """Whatever the kernel refuses once fused (a case the matcher lets through), the module is
    planned with the chain as written, and the plan says why, not left unsupported."""
    from stitchcuda.agents.coder import kernels

    def refuse(ctx):
        raise kernels.NotSupported("a chain this kernel does not take")

    monkeypatch.setitem(emit_attention.EMITTERS, emit_attention.OP, refuse)
    monkeypatch.setitem(kernels.emitters(), emit_attention.OP, refuse)  # (the table, where built already)
    p = _plan(Attn(_plain), _qkv())
    assert p.supported, p.unsupported
    assert not _attention(p) and "bmm" in {n["op"] for n in p.graph}
    assert any("attention left unfused" in n and "does not take" in n for n in p.notes), p.notes


def test_head_too_large_keeps_the_library_path():
    """level1/97's shape (head dim 1024): no tile fits, the chain stays bmm → softmax → bmm."""
    mode = FakeTensorMode()
    with mode:
        ins = [torch.empty(32, 32, 512, 1024) for _ in range(3)]
    g = graph.trace_module(Attn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), ins, fake_mode=mode)
    p = planner.plan_graph(g, target=H100)
    assert not _attention(p)
    assert not p.unsupported, p.unsupported
    assert [n["op"] for n in p.graph].count("bmm") == 2


def test_kernelbench_sdpa_at_a_supported_head():
    """level1/97's module (plain scaled_dot_product_attention) at head 128: fused."""
    path = KERNELBENCH / "level1" / "97_ScaledDotProductAttention.py"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    spec = importlib.util.spec_from_file_location("sdpa97", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = _plan(mod.Model(), _qkv((2, 4, 50, 128)))
    assert not p.unsupported
    assert len(_attention(p)) == 1


@pytest.mark.parametrize("case", FUSED, ids=[c[0] for c in FUSED])
def test_the_fused_node_renders_as_math_at_any_batch_with_gradients(case):
    """ModelNew's `_reference` (its custom op's backward and fake shapes) of a plan whose attention
    was fused: the sc_attention node as the ops it stands for, matching the module at the traced
    batch, at other batches where the batch analysis finds each sample computed on its own (q, k, v
    batch-first, masks batch-free), and with the module's gradients."""
    from stitchcuda.agents.coder.batch import analyse
    from stitchcuda.agents.coder.reference_math import render_reference

    _, module, inputs, _ = case
    p = _plan(module, inputs)
    (node,) = _attention(p)
    info = analyse(p.graph)
    tensors = [n for n in p.graph if n["op"] == "input" and "shape" in n]
    (out,) = [n for n in p.graph if n["op"] == "output"]
    returns = [ref_name(v) for v in out["args"]["values"]]
    ref = render_reference(p.graph, [n["name"] for n in tensors], [], returns, batch=info if info.dynamic else None)
    space: dict = {"torch": torch}
    exec(compile(ref.text, "<reference>", "exec"), space)  # noqa: S102 - the rendered plan
    state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    fp32 = inputs[0].dtype == torch.float32
    tol = {"rtol": 1e-5, "atol": 1e-5} if fp32 else {"rtol": 2e-2, "atol": 2e-2}
    # Masks are per case (batch-free); the batch is q, k and v's.
    sizes = [inputs[0].shape[0], *((1, inputs[0].shape[0] + 3) if info.dynamic else ())]
    assert info.dynamic == (not any(x.dtype == torch.bool for x in inputs)), info.reason
    for n in sizes:
        args = [torch.randn(n, *x.shape[1:]).to(x.dtype) if x.dtype != torch.bool else x for x in inputs]
        if fp32:
            args = [a.requires_grad_() if a.is_floating_point() else a for a in args]
        values = [state[t["key"]] if t.get("kind") != "arg" else args[t["index"]] for t in tensors]
        (got,) = space["_reference"](values, [])
        want = module(*args)
        torch.testing.assert_close(got, want.to(got.dtype).reshape(got.shape), **tol, msg=f"batch {n}")
        if fp32:
            g = torch.randn_like(want)
            grads = torch.autograd.grad(got.reshape(want.shape), [a for a in args if a.requires_grad], g)
            wants = torch.autograd.grad(want, [a for a in args if a.requires_grad], g)
            for a, b in zip(grads, wants, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
