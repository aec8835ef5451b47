"""A matrix product read only in some rows, columns or batches is computed only there
(agents/plan/picked_products.py): its operands are cut first. Checked on the plan (what is cut, by how
much, and what must stay whole) and through the planned graph as PyTorch runs it, against the module."""

from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn as nn
from conftest import (
    KERNELBENCH,
    assert_planned_math_matches,
    builtin_candidate,
    needs_nvcc,
    plan_of,
    planned_math,
)

from stitchcuda.agents.plan import picked_products


class Picked(nn.Module):
    """x times a parameter by `product`, then `pick` of the result."""

    def __init__(self, w_shape, product, pick, bias_shape=None):
        super().__init__()
        self.w = nn.Parameter(torch.randn(*w_shape))
        self.bias = nn.Parameter(torch.randn(*bias_shape)) if bias_shape else None
        self.product, self.pick = product, pick

    def forward(self, x):
        y = self.product(x, self.w) if self.bias is None else self.product(self.bias, x, self.w)
        return self.pick(y)


class LastPosition(nn.Module):
    """A language model's head on every position, read at the last one."""

    def __init__(self, bias: bool):
        super().__init__()
        self.head = nn.Linear(8, 12, bias=bias)

    def forward(self, x):
        return self.head(torch.tanh(x))[:, -1]


class LastState(nn.Module):
    """Mamba2's inter-chunk recurrence: every z row of the einsum made, the last one returned."""

    def __init__(self):
        super().__init__()
        self.states = nn.Parameter(torch.randn(2, 3, 4, 5, 6))

    def forward(self, decay):
        return torch.einsum("bhzc,bchpn->bzhpn", decay, self.states)[:, -1]


# name -> (module, input shape, the product's shape after the cut)
PICKED = {
    "last z row of an einsum": (LastState, (2, 4, 3, 3), [8, 1, 30]),
    "last position of a linear head": (lambda: LastPosition(False), (3, 5, 8), [3, 12]),
    "last position, with bias": (lambda: LastPosition(True), (3, 5, 8), [3, 12]),
    "columns of a product": (lambda: Picked((6, 10), torch.mm, lambda y: y[:, 2:5]), (7, 6), [7, 3]),
    "batches of a bmm": (lambda: Picked((5, 6, 4), torch.bmm, lambda y: y[1:3]), (5, 3, 6), [2, 3, 4]),
    "every other row": (lambda: Picked((6, 4), torch.mm, lambda y: y[1::2]), (8, 6), [4, 4]),
    "every third row, of an odd count": (lambda: Picked((6, 4), torch.mm, lambda y: y[::3]), (7, 6), [3, 4]),
    "one element through a transpose": (lambda: Picked((3, 6, 4), torch.bmm, lambda y: y.transpose(1, 2)[:, 1, 2]),
                                        (3, 5, 6), [3, 1, 1]),
    "a row of a baddbmm, with its bias": (lambda: Picked((2, 6, 4), torch.baddbmm, lambda y: y[:, -2],
                                                         bias_shape=(2, 5, 1)), (2, 5, 6), [2, 1, 4]),
    "columns of an addmm": (lambda: Picked((6, 10), torch.addmm, lambda y: y[..., 7:], bias_shape=(10,)),
                            (4, 6), [4, 3]),
}


class ReadTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        y = x @ self.w
        return y[:, -1], y.sum()


class ViewOfTheLast(nn.Module):
    """The picked view is read again through a view: that view's layout is over the product."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        y = (x @ self.w)[:3]
        return y, y.t()


KEPT = {
    "read twice": (ReadTwice, (5, 6)),
    "through an activation": (lambda: Picked((6, 4), torch.mm, lambda y: torch.relu(y)[:, -1]), (5, 6)),
    "all of it, through views": (lambda: Picked((3, 6, 4), torch.bmm, lambda y: y.transpose(1, 2) * 2), (3, 5, 6)),
    "the diagonal, in every row and column": (lambda: Picked((6, 4), torch.mm, torch.diagonal), (4, 6)),
    "the picked view read through a view": (ViewOfTheLast, (5, 6)),
}


def _cuts(plan) -> list[dict]:
    return [n for n in plan.graph if "operands cut" in n.get("folded", "")]


@pytest.mark.parametrize("make,shape,cut", PICKED.values(), ids=PICKED.keys())
def test_only_what_is_read_is_computed_and_the_math_holds(make, shape, cut):
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape)
    plan = plan_of(module, [x])
    (prod,) = _cuts(plan)
    assert prod["shape"] == cut
    assert_planned_math_matches(plan, module, (x, torch.randn(*shape)), 1e-5)


@pytest.mark.parametrize("make,shape", KEPT.values(), ids=KEPT.keys())
def test_what_is_read_elsewhere_or_whole_stays(make, shape):
    assert _cuts(plan_of(make(), [torch.randn(*shape)])) == []


def test_off_switch(monkeypatch):
    monkeypatch.setenv(picked_products.PICKED_PRODUCTS_ENV, "0")
    make, shape, _ = PICKED["last z row of an einsum"]
    assert _cuts(plan_of(make(), [torch.randn(*shape)])) == []


def test_a_head_read_at_the_last_position_stays_batch_dynamic():
    """The rows of every sample's last position are a split and a select of the flattened rows,
    which the batch is followed through (a strided slice would cut along it)."""
    from stitchcuda.agents.coder import batch

    plan = plan_of(LastPosition(False), [torch.randn(3, 5, 8)])
    assert batch.analyse(plan.graph).dynamic, batch.analyse(plan.graph).reason


def _mamba2():
    path = KERNELBENCH / "level3" / "49_Mamba2ReturnFinalState.py"
    if not path.exists() or importlib.util.find_spec("einops") is None:
        pytest.skip(f"{path} (and einops) needed")
    spec = importlib.util.spec_from_file_location("_mamba2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mamba2_computes_only_the_last_state():
    """Level 3's Mamba2ReturnFinalState, small: its last bmm makes one z row of three."""
    mod = _mamba2()
    torch.manual_seed(0)
    module = mod.Model(2, 8, 2, 4, 3, 4)
    x = torch.rand(2, 8, 2, 4)
    plan = plan_of(module, [x])
    (prod,) = _cuts(plan)
    assert prod["op"] == "bmm" and prod["shape"] == [4, 1, 12]
    with torch.no_grad():
        (got,) = planned_math(plan, module)(x)
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)


@needs_nvcc
@pytest.mark.usefixtures("isolated_cache")
def test_a_cut_product_builds_clean_for_sm90(tmp_path):
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    for i, key in enumerate(("last z row of an einsum", "a row of a baddbmm, with its bias", "every other row")):
        make, shape, _ = PICKED[key]
        cand = builtin_candidate(make(), [torch.randn(*shape)], host=False)
        assert "operands cut" in cand.files["model_new.py"]
        assert_builds_clean_for_sm90(cand, tmp_path / f"picked{i}.cu", include)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("make,shape,cut", PICKED.values(), ids=PICKED.keys())
def test_on_the_gpu_cut_products_match(tmp_path, monkeypatch, make, shape, cut):
    from conftest import assert_matches_on_the_gpu

    torch.manual_seed(3)
    assert_matches_on_the_gpu(make(), [torch.randn(*shape)], tmp_path, monkeypatch)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.usefixtures("isolated_cache")
def test_on_the_gpu_mamba2_matches(tmp_path, monkeypatch):
    from conftest import assert_matches_on_the_gpu

    mod = _mamba2()
    torch.manual_seed(3)
    init = (4, 128, 2, 16, 8, 64)
    assert_matches_on_the_gpu(mod.Model(*init), [torch.rand(4, 128, 2, 16)], tmp_path, monkeypatch, init_args=init)
