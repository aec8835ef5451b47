"""A cat along the channels joins a convolution's channels-last tail (planner.cats_join_tails,
STITCHCUDA_CHANNELS_LAST_CAT=1): a U-Net's skip connection and a DenseNet layer's concatenation
stay channels-last, the convolution reading the cat takes it as it is, an NCHW source is read
through a permuted view, and a later tail whose value the cat reads that way is read as it is
once it is channels-last itself. Planned, rendered as aten calls on CPU tensors, built for sm_90;
run against the module on a GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import assert_builds_clean_for_sm90, builtin_candidate, load_model_new, needs_nvcc
from test_conv_channels_last import planned_reference
from test_emit_conv import cudnn_include

from stitchcuda.agents import graph
from stitchcuda.agents.plan import planner

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture(autouse=True)
def _cats_join(monkeypatch):
    monkeypatch.setenv(planner.CAT_JOIN_ENV, "1")


class SkipJoin(nn.Module):
    """U-Net's shape in small: an encoder's result is pooled and kept for a cat with the decoder's
    upsampled (transposed-convolution) result, which the next convolution reads."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 16, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x):
        e = torch.relu(self.enc(x))
        m = torch.relu(self.mid(nn.functional.max_pool2d(e, 2)))
        return self.dec(torch.cat((self.up(m), e), dim=1))


class InputJoin(nn.Module):
    """A cat of the module's own (NCHW) input with a convolution's result: the input is read
    through a channels-last view of it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.after = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.after(torch.cat((x, torch.tanh(self.conv(x))), dim=1))


class DenseStack(nn.Module):
    """DenseNet's concatenations: each layer reads every earlier result, one cat after another."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layers = nn.ModuleList(nn.Conv2d(8 + 4 * k, 4, 3, padding=1) for k in range(3))

    def forward(self, x):
        y = torch.relu(self.stem(x))
        for layer in self.layers:
            y = torch.cat([y, torch.sigmoid(layer(y))], 1)
        return y


class HeldJoin(nn.Module):
    """One tail's channel mean (kept, stored [N, H, W, 1] and read through an NCHW view outside it)
    in another convolution's cat: that cat stays NCHW, its tail with it."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.after = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 6, 1), nn.Conv2d(7, 2, 1)

    def forward(self, x):
        held = torch.relu(self.a(x)).mean(1, keepdim=True)
        return self.after(torch.cat([torch.relu(self.b(x)), held], 1)), held


CASES = [(SkipJoin, [torch.randn(2, 3, 12, 16)]), (DenseStack, [torch.randn(2, 3, 10, 12)]),
         (InputJoin, [torch.randn(2, 3, 9, 7)])]


def _plan(make, inputs):
    plan = planner.plan_graph(graph.trace_module(make(), inputs))
    assert plan.supported, plan.unsupported
    return plan


def _reads(plan, node) -> list[dict]:
    nodes = graph.by_name(plan.graph)
    return [nodes[graph.ref_name(r)] for r in node["args"]["tensors"]]


def test_a_skip_connection_stays_channels_last():
    """The transposed convolution's bias is split off (split_conv_bias: the cat computes it as it
    reads it) so that it too writes channels-last; the cat reads both sources as they are."""
    plan = _plan(*CASES[0])
    enc, mid, up, dec = [n for n in plan.graph if n["op"] == "convolution"]
    cat = next(n for n in plan.graph if n["op"] == "cat")
    assert cat["args"]["dim"] == 3 and cat["shape"] == [2, 12, 16, 16], cat
    assert enc["args"]["channels_last"] and up["args"]["channels_last"] and dec["args"]["input_channels_last"]
    upsampled, encoded = _reads(plan, cat)
    assert upsampled["op"] == "add" and upsampled["shape"] == encoded["shape"] == [2, 12, 16, 8]
    assert not any(n.get("view") and n["op"] == "permute" for n in _reads(plan, cat))
    notes = [g.note for g in plan.groups]
    assert any("channels-last" in n and "pool" in n for n in notes), notes
    assert any("cat of 2 along dim 3 (source 0: add, computed as read), 16 bytes" in n for n in notes), notes


def test_an_nchw_source_is_read_through_a_channels_last_view():
    plan = _plan(*CASES[2])
    cat = next(n for n in plan.graph if n["op"] == "cat")
    own, computed = _reads(plan, cat)
    assert own["op"] == "permute" and own["shape"] == [2, 9, 7, 3] and own["stride"] == [3 * 9 * 7, 7, 1, 9 * 7]
    assert computed["shape"] == [2, 9, 7, 5] and cat["args"]["dim"] == 3


def test_dense_concatenations_read_every_layer_as_it_is():
    """The stem's tail takes every cat (each reads the one before); each layer's tail then finds its
    cat reading it through a view, and the cat reads it as it is instead: no view is left."""
    plan = _plan(*CASES[1])
    cats = [n for n in plan.graph if n["op"] == "cat"]
    assert len(cats) == 3 and all(c["args"]["dim"] == 3 for c in cats)
    for cat in cats:
        assert all(not s.get("view") and len(s["shape"]) == 4 and s["shape"][1:3] == [10, 12] for s in _reads(plan, cat))
    convs = [n for n in plan.graph if n["op"] == "convolution"]
    assert all(c["args"].get("channels_last") for c in convs), [c["args"] for c in convs]
    assert all(c["args"].get("input_channels_last") for c in convs[1:]), [c["args"] for c in convs]
    assert not any(n["op"] == "permute" and n["name"].endswith("_channels_last") for n in plan.graph)


def test_off_the_cats_hold_their_tails_nchw(monkeypatch):
    monkeypatch.setenv(planner.CAT_JOIN_ENV, "0")
    plan = _plan(*CASES[0])
    cat = next(n for n in plan.graph if n["op"] == "cat")
    assert cat["args"]["dim"] == 1 and cat["shape"] == [2, 16, 12, 16]
    enc, _, up, _ = [n for n in plan.graph if n["op"] == "convolution"]
    assert not enc["args"].get("channels_last") and graph.ref_name(up["args"]["bias"]) is not None


@pytest.mark.parametrize(("make", "inputs"), CASES, ids=[m.__name__ for m, _ in CASES])
def test_the_plan_still_computes_the_module(make, inputs):
    torch.manual_seed(3)
    module = make()
    stored, views = planned_reference(module, inputs)
    (s,), (view,) = stored, views
    got = s if view is None else s.permute(*view["args"]["dims"])
    if make is DenseStack:  # the last cat's channels-last storage, returned as a view
        assert view is not None and view["op"] == "permute"
    torch.testing.assert_close(got, module(*inputs).detach(), rtol=1e-5, atol=1e-5)


def test_a_kept_reduction_of_another_tail_holds_the_cat_nchw():
    module, inputs = HeldJoin(), [torch.randn(2, 3, 6, 5)]
    plan = _plan(HeldJoin, inputs)
    cat = next(n for n in plan.graph if n["op"] == "cat")
    a, b, _ = [n for n in plan.graph if n["op"] == "convolution"]
    assert a["args"].get("channels_last") and not b["args"].get("channels_last") and cat["args"]["dim"] == 1
    stored, views = planned_reference(module, inputs)
    want = module(*inputs)
    for s, view, w in zip(stored, views, want, strict=True):
        got = s if view is None else s.view(view["args"]["size"]) if view["op"] == "view" else s.permute(*view["args"]["dims"])
        torch.testing.assert_close(got, w.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.skipif(cudnn_include() is None, reason="no cudnn.h (set STITCHCUDA_EXTRA_INCLUDE to a folder with it)")
@pytest.mark.parametrize(("make", "inputs"), CASES, ids=[m.__name__ for m, _ in CASES])
def test_the_candidates_build_for_sm90(tmp_path, make, inputs):
    cand = builtin_candidate(make(), inputs, host=False)
    assert_builds_clean_for_sm90(cand, tmp_path / f"{make.__name__}.cu", cudnn_include())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("make", "inputs"), CASES, ids=[m.__name__ for m, _ in CASES])
def test_on_the_gpu_the_candidates_match_the_module(tmp_path, make, inputs):
    torch.manual_seed(4)
    module = make()
    cand = builtin_candidate(module, inputs, host=False)
    module = module.cuda()
    new, _ = load_model_new(cand, module, tmp_path / make.__name__)
    args = [t.cuda() for t in inputs]
    with torch.no_grad():
        want = module(*args)
        for _ in range(2):
            got = new.cuda()(*args)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
    assert got.is_contiguous(memory_format=torch.channels_last)
