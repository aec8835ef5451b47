"""Random draws in forward (torch.randn / rand / randint and their _like forms) stay PyTorch's
calls in the generated ModelNew (agents/random_draws.py), made in the reference's order at
the traced shapes; the Verifier seeds the generator alike before the candidate's and the
reference's calls, so both draw the same numbers and the kernels' arithmetic is what is judged."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, hack_candidate, hack_task, load_model_new, needs_nvcc

from stitchcuda.agents import graph
from stitchcuda.agents.coder import batch
from stitchcuda.agents.plan import planner
from stitchcuda.agents.random_draws import draws_as_inputs
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Task


class Draws(nn.Module):
    def forward(self, x):
        noise = torch.randn(3, x.shape[1], device=x.device)
        picks = torch.randint(0, 5, (3, 4))
        return x * noise + torch.rand_like(x), picks


def test_draws_become_inputs_in_trace_order():
    nodes = draws_as_inputs(graph.trace_module(Draws(), [torch.randn(3, 4)]))
    drawn = [(n["name"], n["draw"]["fn"]) for n in nodes if n.get("kind") == "draw"]
    assert drawn == [("randn", "randn"), ("randint", "randint"), ("rand_like", "rand")]
    assert next(n for n in nodes if n["name"] == "randint")["draw"] == {"fn": "randint", "low": 0, "high": 5}
    plan = planner.plan_graph(graph.trace_module(Draws(), [torch.randn(3, 4)]))
    assert plan.supported, plan.unsupported
    info = batch.analyse(plan.graph)
    assert info.size is None and "draws random numbers" in info.reason


def test_a_draw_with_a_generator_stays_unsupported():
    class Seeded(nn.Module):
        def forward(self, x):
            return x + torch.randn(x.shape, generator=torch.Generator().manual_seed(1))

    plan = planner.plan_graph(graph.trace_module(Seeded(), [torch.randn(3, 4)]))
    assert not plan.supported


@needs_nvcc
def test_the_candidate_draws_what_the_reference_draws(tmp_path, isolated_cache):
    module = Draws()
    cand = builtin_candidate(module, [torch.randn(3, 4)])
    text = cand.files["model_new.py"]
    assert text.index("torch.randn((3, 4)") < text.index("torch.randint(0, 5, (3, 4)") < text.index("torch.rand((3, 4)")
    new, _ = load_model_new(cand, module, tmp_path)
    x = torch.randn(3, 4)
    torch.manual_seed(7)
    got = new(x)
    torch.manual_seed(7)
    want = module(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.manual_seed(8)
    assert not torch.allclose(new(x)[0], got[0])  # another draw: the noise is not baked in


@needs_nvcc
def test_the_verifier_seeds_both_sides_alike(tmp_path, isolated_cache):
    """A candidate making the reference's draw with PyTorch and the arithmetic in its kernel is
    correct (both calls see the same generator state) and no hack; one returning the noise alone is
    wrong; a reference-only run of the same file still works (the draws are the reference's)."""
    opts = VerifyOptions(cpu_only=True, time_compile=False)
    good = verify(hack_task("ref_noisy"), hack_candidate("good_noisy"), tmp_path / "good", opts)
    assert good.status == "ok" and good.correct, good.message
    assert not good.hack_findings
    bad = verify(hack_task("ref_noisy"), hack_candidate("hack_noise_as_output"), tmp_path / "bad", opts)
    assert not bad.correct and not bad.accepted, bad.message
    # The random sets draw one secret noise (so that the inputs alone move the outputs between draws):
    # the noise alone is then one output for every random input, which the follow-inputs check names.
    assert bad.status == "hacked" and "the reference's changed" in bad.message, bad.message


class Fills(nn.Module):
    """Fills of a fresh tensor: normal_ and uniform_ of empty_like, and F.gumbel_softmax (hard, its
    -empty_like(x).exponential_().log() noise), as VQ and discrete-latent modules draw."""

    def forward(self, x):
        a = torch.empty_like(x).normal_(0.5, 2.0)
        b = x.new_empty(x.shape).uniform_(-1.0, 3.0)
        return x * a + b, torch.nn.functional.gumbel_softmax(x, tau=0.5, hard=True)


def test_fills_of_fresh_tensors_are_draws():
    nodes = draws_as_inputs(graph.trace_module(Fills(), [torch.randn(3, 4)]))
    drawn = [n["draw"] for n in nodes if n.get("kind") == "draw"]
    assert drawn == [{"fn": "normal_", "args": [0.5, 2.0]}, {"fn": "uniform_", "args": [-1.0, 3.0]},
                     {"fn": "exponential_", "args": [1.0]}]
    plan = planner.plan_graph(graph.trace_module(Fills(), [torch.randn(3, 4)]))
    assert plan.supported, plan.unsupported


@needs_nvcc
def test_the_candidate_fills_what_the_reference_fills(tmp_path, isolated_cache):
    module = Fills()
    new, _ = load_model_new(builtin_candidate(module, [torch.randn(3, 4)]), module, tmp_path)
    x = torch.randn(3, 4)
    torch.manual_seed(11)
    got = new(x)
    torch.manual_seed(11)
    want = module(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    torch.manual_seed(12)
    assert not torch.allclose(new(x)[0], got[0])  # another draw: the noise is not baked in


DROPOUT_REF = '''"""Reference: training-mode dropout between an affine map and a softmax (as level 2's 66)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, p: float = 0.2):
        super().__init__()
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return torch.softmax(self.dropout(x * 2.0 + 1.0), dim=1)


def get_inputs():
    return [torch.randn(16, 40)]


def get_init_inputs():
    return [0.2]
'''


def _model_of(reference: str, *init):
    """The Model class of one of this file's reference texts (written to a file for the GPU tests), made."""
    namespace: dict = {}
    exec(compile(reference, "reference", "exec"), namespace)  # noqa: S102 - the test's own reference text
    return namespace["Model"](*init)


def _dropout_module():
    return _model_of(DROPOUT_REF, 0.2)


def test_a_dropout_mask_becomes_a_draw_of_eager_dropouts_own_mask():
    nodes = draws_as_inputs(graph.trace_module(_dropout_module(), [torch.randn(16, 40)]))
    (mask,) = [n for n in nodes if n.get("kind") == "draw"]
    assert mask["draw"] == {"fn": "dropout_mask", "p": 0.2, "of": "float32"} and mask["dtype"] == "bool"
    plan = planner.plan_graph(graph.trace_module(_dropout_module(), [torch.randn(16, 40)]))
    assert plan.supported, plan.unsupported


def test_native_dropout_over_ones_is_a_draw_and_over_anything_else_compute():
    from stitchcuda.agents.verify.dynamic_check import OpRecorder, torch_compute_finding
    from stitchcuda.agents.verify.static_check import check_source

    x = torch.randn(4, 8)
    with OpRecorder() as rec:
        torch.ops.aten.native_dropout(torch.ones(4, 8), 0.2, True)
    assert torch_compute_finding(rec.ops) is None, rec.ops
    with OpRecorder() as rec:
        torch.ops.aten.native_dropout(x, 0.2, True)
    assert torch_compute_finding(rec.ops) is not None
    head = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    mask = "        m = torch.ops.aten.native_dropout(torch.ones((4, 8), dtype=torch.float32), 0.2, True)[1]\n"
    assert check_source(head + mask + "        return m\n") == []
    direct = "        return torch.ops.aten.native_dropout(x, 0.2, True)[0]\n"
    assert "torch-compute-in-forward" in {f.code for f in check_source(head + direct)}


@needs_nvcc
def test_the_candidate_draws_the_mask_the_reference_draws(tmp_path, isolated_cache):
    """Eager dropout draws its mask inside native_dropout; the candidate draws the same one (on
    CPU tensors here, through the host entries), so its kernels compute what the reference does;
    and neither hack check takes the draw for PyTorch compute."""
    module = _dropout_module()
    x = torch.randn(16, 40)
    cand = builtin_candidate(module, [x])
    (draw,) = [ln for ln in cand.files["model_new.py"].splitlines() if "native_dropout(" in ln]
    # native_dropout's bool mask, read by the kernels a byte an element: no conversion to float.
    assert "torch.ones((16, 40), dtype=torch.float32" in draw and draw.endswith(", 0.2, True)[1]"), draw
    new, _ = load_model_new(cand, module, tmp_path / "load")
    torch.manual_seed(5)
    got = new(x)
    torch.manual_seed(5)
    torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-6)
    torch.manual_seed(6)
    assert not torch.allclose(new(x), got)  # another mask: none is baked in
    # Neither hack check takes the draw for PyTorch compute: the source, and the ops its forward runs.
    from stitchcuda.agents.verify.dynamic_check import OpRecorder, torch_compute_finding
    from stitchcuda.agents.verify.static_check import check_source

    assert not [f for f in check_source(cand.files["model_new.py"]) if f.code == "torch-compute-in-forward"]
    with OpRecorder() as rec:
        new(x)
    assert "native_dropout(ones)" in rec.ops and torch_compute_finding(rec.ops) is None, rec.ops


@pytest.mark.gpu
def test_on_the_gpu_the_verifier_passes_the_candidates_dropout_mask(tmp_path, isolated_cache):
    """On CUDA the mask drawn as eager draws it is ATen's fused dropout kernel (one launch per mask):
    the timeline check takes it for the draw the op recorder saw, and the mask equals the one eager
    dropout draws in the reference, so the candidate is correct and no hack."""
    ref = tmp_path / "dropout_ref.py"
    ref.write_text(DROPOUT_REF)
    cand = builtin_candidate(_dropout_module(), [torch.randn(16, 40)], host=False)
    v = verify(Task(path=ref), cand, tmp_path / "v", VerifyOptions(timeout_s=300, trials=10, time_compile=False))
    assert v.status == "ok" and v.correct, (v.status, v.message, [c for c in v.checks if not c["ok"]][:2])
    assert not v.hack_findings, v.hack_findings
    assert any("fused_dropout" in k for k in v.kernel_us), list(v.kernel_us)


@needs_nvcc
def test_a_bf16_dropout_mask_is_drawn_over_bf16_ones(tmp_path, isolated_cache):
    """ATen's fused dropout vectorises by element size, so the mask is drawn over ones of the dtype
    the reference's dropout saw; the candidate matches the bf16 module under the same seed."""

    class Bf16Dropout(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.3)

        def forward(self, x):
            return torch.tanh(self.drop(x * 2.0 + 1.0))

    module, x = Bf16Dropout(), torch.randn(8, 64).bfloat16()
    cand = builtin_candidate(module, [x])
    assert "torch.ones((8, 64), dtype=torch.bfloat16" in cand.files["model_new.py"]
    new, _ = load_model_new(cand, module, tmp_path / "load")
    torch.manual_seed(5)
    got = new(x)
    torch.manual_seed(5)
    torch.testing.assert_close(got, module(x))


class MaskedByFills(nn.Module):
    """Masks eager PyTorch draws by bernoulli_ over a fresh tensor: feature dropout (F.dropout2d's
    noise of shape (N, C, 1, 1)) and stochastic depth (timm's drop_path: x.new_empty((N, 1, 1, 1))
    .bernoulli_(keep)); beside them a plain dropout, whose mask eager PyTorch draws by native_dropout."""

    def forward(self, x):
        keep = 0.8
        y = torch.nn.functional.dropout2d(x, 0.25, True)
        y = y * x.new_empty((x.shape[0], 1, 1, 1)).bernoulli_(keep) / keep
        return torch.nn.functional.dropout(y, 0.1, True)


def test_bernoulli_over_a_fresh_tensor_is_its_fill_and_dropout_stays_native_dropouts_mask():
    nodes = draws_as_inputs(graph.trace_module(MaskedByFills(), [torch.randn(4, 6, 3, 3)]))
    drawn = [(n["shape"], n["dtype"], n["draw"]) for n in nodes if n.get("kind") == "draw"]
    assert drawn == [([4, 6, 1, 1], "float32", {"fn": "bernoulli_", "args": [0.75]}),
                     ([4, 1, 1, 1], "float32", {"fn": "bernoulli_", "args": [0.8]}),
                     ([4, 6, 3, 3], "bool", {"fn": "dropout_mask", "p": 0.1, "of": "float32"})]
    plan = planner.plan_graph(graph.trace_module(MaskedByFills(), [torch.randn(4, 6, 3, 3)]))
    assert plan.supported, plan.unsupported


def test_bernoulli_of_a_tensor_of_probabilities_stays_unsupported():
    class Stochastic(nn.Module):
        def forward(self, x):
            return torch.bernoulli(torch.sigmoid(x))

    assert not [n for n in draws_as_inputs(graph.trace_module(Stochastic(), [torch.randn(3, 4)]))
                if n.get("kind") == "draw"]
    assert not planner.plan_graph(graph.trace_module(Stochastic(), [torch.randn(3, 4)])).supported


@needs_nvcc
def test_the_candidate_draws_feature_and_path_masks_as_the_reference_does(tmp_path, isolated_cache):
    """ModelNew makes each bernoulli_ fill as the reference's forward makes it (on CUDA native_dropout's
    numbers are not bernoulli_'s, so a fill drawn as a dropout mask would be another mask there); on
    the CPU both sides then agree under one seed, and another seed draws other masks."""
    module = MaskedByFills()
    x = torch.randn(4, 6, 3, 3)
    cand = builtin_candidate(module, [x])
    text = cand.files["model_new.py"]
    assert "torch.empty((4, 6, 1, 1), dtype=torch.float32" in text and ".bernoulli_(0.75)" in text
    assert "torch.empty((4, 1, 1, 1), dtype=torch.float32" in text and ".bernoulli_(0.8)" in text
    assert text.count("native_dropout(") == 1  # the plain dropout's mask alone
    new, _ = load_model_new(cand, module, tmp_path)
    torch.manual_seed(5)
    got = new(x)
    torch.manual_seed(5)
    want = module(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.manual_seed(6)
    assert not torch.allclose(new(x), got)


def test_the_verifier_takes_a_bernoulli_fill_as_a_draw(tmp_path):
    """A candidate making the reference's bernoulli_ fill with PyTorch and the arithmetic in its kernel is
    correct and no hack; bernoulli against a tensor of probabilities is PyTorch work on values the
    forward made, and the op recorder files it as compute."""
    opts = VerifyOptions(cpu_only=True, time_compile=False)
    good = verify(hack_task("ref_masked"), hack_candidate("good_masked"), tmp_path / "good", opts)
    assert good.status == "ok" and good.correct, good.message
    assert not good.hack_findings
    from stitchcuda.agents.verify.dynamic_check import OpRecorder
    from stitchcuda.agents.verify.torch_ops import BERNOULLI_FILL, BERNOULLI_OF_TENSOR

    with OpRecorder() as fills:
        torch.empty(5).bernoulli_(0.3)
        torch.bernoulli(torch.empty(5), 0.3)
        torch.empty(5).bernoulli_()  # (p the default 0.5: dispatch leaves it out)
    assert not fills.compute_ops and fills.ops[BERNOULLI_FILL] == 3, fills.ops
    probs = torch.rand(5)
    with OpRecorder() as against:
        torch.bernoulli(probs)
        torch.empty(5).bernoulli_(probs)
    assert against.compute_ops == {BERNOULLI_OF_TENSOR: 2}


MASKED_REF = '''"""Reference: feature dropout, stochastic depth and dropout in training mode (MaskedByFills)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        keep = 0.8
        y = torch.nn.functional.dropout2d(x, 0.25, True)
        y = y * x.new_empty((x.shape[0], 1, 1, 1)).bernoulli_(keep) / keep
        return torch.nn.functional.dropout(y, 0.1, True)


def get_inputs():
    return [torch.randn(16, 32, 8, 8)]


def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_on_the_gpu_feature_and_path_masks_are_the_references(tmp_path, isolated_cache):
    """On CUDA bernoulli_'s numbers are not native_dropout's: the candidate's fills must be drawn as
    bernoulli_ for its masks to be the reference's (drawn as dropout masks, whole channels differed)."""
    _passes_on_the_gpu(MASKED_REF, MaskedByFills(), tmp_path)


def _passes_on_the_gpu(reference: str, module: nn.Module, tmp_path) -> None:
    """The built-in candidate of `module` through the Verifier on CUDA against `reference` (its
    text, whose inputs are 16 x 32 x 8 x 8): correct, and no hack finding."""
    ref = tmp_path / "reference.py"
    ref.write_text(reference)
    cand = builtin_candidate(module, [torch.randn(16, 32, 8, 8)], host=False)
    v = verify(Task(path=ref), cand, tmp_path / "v", VerifyOptions(timeout_s=300, trials=10, time_compile=False))
    assert v.status == "ok" and v.correct, (v.status, v.message, [c for c in v.checks if not c["ok"]][:2])
    assert not v.hack_findings, v.hack_findings


def test_a_reference_drawing_against_probabilities_counts_as_drawing():
    """bernoulli of a tensor is filed as compute under its own name; the worker must still see the
    reference draw (no referee, the seeds alike), as for every other bernoulli."""
    from stitchcuda.agents.verify import dynamic_check as dyn
    from stitchcuda.agents.verify.worker import draws_random

    probs = torch.rand(6)
    for fn in (lambda: torch.bernoulli(probs), lambda: torch.nn.functional.dropout(probs, 0.5, True),
               lambda: torch.empty(6).bernoulli_(0.5)):
        _, ops, _ = dyn.trace_ops(fn)
        assert draws_random(ops), ops


def test_bernoulli_in_place_over_a_transposed_tensor_stays_unsupported():
    """t.bernoulli_(keep) draws in t's memory order: over a transposed tensor its mask is not the
    one a contiguous fill draws (a review's repro), so it is no draw ModelNew reproduces."""

    class Transposed(nn.Module):
        def forward(self, x):
            return x * torch.empty_like(x.t()).bernoulli_(0.7).t()

    x = torch.randn(6, 4)
    assert not [n for n in draws_as_inputs(graph.trace_module(Transposed(), [x])) if n.get("kind") == "draw"]
    torch.manual_seed(3)
    eager = torch.empty_like(x.t()).bernoulli_(0.7)
    torch.manual_seed(3)
    assert not torch.equal(eager, torch.empty(4, 6).bernoulli_(0.7))  # the draw it must not be taken for


EAGER_BERNOULLI_REF = '''"""Reference: dropouts that trace like F.dropout but that eager PyTorch draws by bernoulli_ over an
empty_like of their input (ATen's _dropout_impl): an in-place dropout, and alpha dropout in and out
of place; beside them a plain dropout, drawn by native_dropout."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop_ = nn.Dropout(0.3, inplace=True)
        self.alpha = nn.AlphaDropout(0.2)

    def forward(self, x):
        y = self.drop_(x * 2.0)
        y = self.alpha(torch.tanh(y))
        y = torch.alpha_dropout_(y + 1.0, 0.1, True)
        return torch.nn.functional.dropout(y, 0.4, True)


def get_inputs():
    return [torch.randn(16, 32, 8, 8)]


def get_init_inputs():
    return []
'''


def _eager_bernoulli_dropouts():
    return _model_of(EAGER_BERNOULLI_REF)


def test_in_place_and_alpha_dropouts_are_bernoulli_fills_and_dropout_stays_native_dropouts_mask():
    nodes = draws_as_inputs(graph.trace_module(_eager_bernoulli_dropouts(), [torch.randn(4, 6, 3, 3)]))
    drawn = [(n["shape"], n["dtype"], n["draw"]) for n in nodes if n.get("kind") == "draw"]
    assert drawn == [([4, 6, 3, 3], "float32", {"fn": "bernoulli_", "args": [0.7]}),
                     ([4, 6, 3, 3], "float32", {"fn": "bernoulli_", "args": [0.8]}),
                     ([4, 6, 3, 3], "float32", {"fn": "bernoulli_", "args": [0.9]}),
                     ([4, 6, 3, 3], "bool", {"fn": "dropout_mask", "p": 0.4, "of": "float32"})]
    assert planner.plan_graph(graph.trace_module(_eager_bernoulli_dropouts(), [torch.randn(4, 6, 3, 3)])).supported


@pytest.mark.parametrize("call", [
    lambda x: torch.nn.functional.alpha_dropout(x, 0.3, True),
    lambda x: torch.nn.functional.alpha_dropout(x.clone(), 0.3, True, inplace=True),
    lambda x: torch.alpha_dropout(x, 0.3, True),
    lambda x: torch.nn.functional.dropout(x.clone(), 0.3, True, inplace=True),
    lambda x: torch.dropout_(x.clone(), 0.3, True),
], ids=["alpha", "alpha in place", "torch.alpha_dropout", "dropout in place", "torch.dropout_"])
def test_the_traced_composition_is_atens_own_arithmetic(call):
    """On the CPU eager PyTorch draws these as ATen's _dropout_impl does on CUDA, so the composition
    the trace runs must give the same bits under one seed (the masks and the rounding alike)."""
    from stitchcuda.agents.eager_dropouts import EagerDropouts

    x = torch.randn(64, 33)
    torch.manual_seed(11)
    eager = call(x)
    torch.manual_seed(11)
    with EagerDropouts():
        traced = call(x)
    assert torch.equal(traced, eager)
    torch.manual_seed(12)
    assert not torch.equal(call(x), eager)


def test_dropouts_that_draw_nothing_run_as_called():
    """Eval mode, p of 0 and 1, and a plain dropout (the fused kernel's draw) are left to PyTorch."""
    from stitchcuda.agents.eager_dropouts import EagerDropouts

    x = torch.randn(8, 5)
    with EagerDropouts():
        assert torch.equal(torch.nn.functional.alpha_dropout(x, 0.3, False), x)
        assert torch.equal(torch.nn.functional.dropout(x.clone(), 0.0, True, inplace=True), x)
        assert torch.equal(torch.nn.functional.dropout(x.clone(), 1.0, True, inplace=True), torch.zeros_like(x))
    nodes = graph.trace_module(_dropout_module(), [torch.randn(16, 40)])
    assert not [n for n in nodes if n["op"] == "empty_like"]  # the plain dropout's trace is as before


@needs_nvcc
def test_the_candidate_draws_in_place_and_alpha_masks_as_the_reference_does(tmp_path, isolated_cache):
    module = _eager_bernoulli_dropouts()
    x = torch.randn(4, 6, 3, 3)
    cand = builtin_candidate(module, [x])
    text = cand.files["model_new.py"]
    for keep in (0.7, 0.8, 0.9):
        assert f".bernoulli_({keep})" in text
    assert text.count("native_dropout(") == 1
    new, _ = load_model_new(cand, module, tmp_path)
    torch.manual_seed(5)
    got = new(x)
    torch.manual_seed(5)
    want = module(x.clone())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.manual_seed(6)
    assert not torch.allclose(new(x), got)




@pytest.mark.gpu
def test_on_the_gpu_in_place_and_alpha_dropout_masks_are_the_references(tmp_path, isolated_cache):
    """On CUDA an in-place or alpha dropout draws bernoulli_ over an empty_like, not the fused
    dropout kernel: drawn as the fused kernel's mask (as they trace), the masks differed."""
    _passes_on_the_gpu(EAGER_BERNOULLI_REF, _eager_bernoulli_dropouts(), tmp_path)
