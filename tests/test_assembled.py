"""Layout ops a sweep of user-style modules found unsupported. A tensor made empty and filled by slice
copies becomes one layout op (agents/plan/assembled.py):
circular padding, as F.pad(mode="circular") and Conv2d(padding_mode="circular") trace. Checked on the
plan, through the candidate's CPU entry points against PyTorch (1-, 2- and 3-D, asymmetric pads), that
a pattern it cannot see whole is left alone, and on the GPU with the convolution. nn.ChannelShuffle
(aten.channel_shuffle), through the CPU entry points."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import builtin_candidate, load_model_new, needs_nvcc, outputs_on_the_gpu

from stitchcuda.agents import graph
from stitchcuda.agents.graph import contiguous_strides, new_node, ref
from stitchcuda.agents.plan import planner
from stitchcuda.agents.plan.assembled import assemble_slice_copies


class CircularPad(nn.Module):
    def __init__(self, pad: tuple[int, ...]) -> None:
        super().__init__()
        self.pad = pad

    def forward(self, x):
        return F.pad(x, self.pad, mode="circular") * 2.0 + 1.0


CASES = {
    "1-d": ((1, 2), (3, 4, 10)),
    "2-d asymmetric": ((2, 1, 1, 3), (2, 3, 10, 12)),
    "2-d one side": ((0, 2, 3, 0), (2, 2, 7, 9)),
    "3-d": ((1, 1, 2, 0, 1, 2), (2, 2, 5, 6, 7)),
}


def test_circular_padding_plans_as_one_layout_op():
    traced = graph.trace_module(CircularPad((2, 1, 1, 3)), [torch.randn(2, 3, 10, 12)])
    assert {"new_empty", "copy_"} <= {n["op"] for n in traced}  # the form this rewrite exists for
    plan = planner.plan_graph(traced)
    assert plan.supported, plan.unsupported
    assert not {"new_empty", "copy_"} & {n["op"] for n in plan.graph}
    assert any("assembled from 5 slice copies" in g.note for g in plan.groups), [g.note for g in plan.groups]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("pad,shape", CASES.values(), ids=CASES.keys())
def test_circular_padding_matches_pytorch_on_the_cpu(pad, shape, tmp_path):
    torch.manual_seed(0)
    module = CircularPad(pad)
    cand = builtin_candidate(module, [torch.randn(shape)], host=True)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for batch in (shape[0], 1, 5):  # per sample: any batch size
            fresh = torch.randn(batch, *shape[1:])
            torch.testing.assert_close(new(fresh), module(fresh), rtol=0, atol=0)


def _graph(read_between: bool) -> list[dict]:
    """x [2, 4]; t = new_empty [2, 6]; t[:, 1:5] = x; t[:, 0:1] = t[:, 4:5]; t[:, 5:6] = t[:, 1:2];
    y = t * 2. read_between: the middle slice of t is read again after the copies (its value is then
    the finished tensor's, which a rewrite of t alone would not give it)."""

    def node(name, op, args, shape, stride, view=False, offset=0):
        return new_node(name, op, args, shape, stride, "float32", view=view, offset=offset)

    def piece(name, of, start, end):
        return node(name, "slice", {"self": ref(of), "dim": 1, "start": start, "end": end, "step": 1},
                    [2, end - start], [6, 1], view=True, offset=start)

    g = [{"name": "x", "op": "input", "kind": "arg", "shape": [2, 4], "dtype": "float32", "stride": [4, 1], "offset": 0},
         node("t", "new_empty", {"self": ref("x"), "size": [2, 6]}, [2, 6], contiguous_strides([2, 6])),
         piece("mid", "t", 1, 5), node("c0", "copy_", {"self": ref("mid"), "src": ref("x")}, [2, 4], [6, 1], offset=1),
         piece("left", "t", 0, 1), piece("from_right", "t", 4, 5),
         node("c1", "copy_", {"self": ref("left"), "src": ref("from_right")}, [2, 1], [6, 1]),
         piece("right", "t", 5, 6), piece("from_left", "t", 1, 2),
         node("c2", "copy_", {"self": ref("right"), "src": ref("from_left")}, [2, 1], [6, 1], offset=5),
         node("y", "mul", {"self": ref("t"), "other": 2.0}, [2, 6], [6, 1])]
    if read_between:
        g.append(node("z", "mul", {"self": ref("mid"), "other": 3.0}, [2, 4], [4, 1]))
    g.append({"name": "output", "op": "output", "args": {"values": [ref("y"), *([ref("z")] if read_between else [])]}})
    return g


def test_only_a_whole_pattern_is_assembled():
    done = {n["name"]: n for n in assemble_slice_copies(_graph(False))}
    assert done["t"]["op"] == "assembled" and not {"c0", "c1", "c2", "mid"} & set(done)
    copies = done["t"]["args"]["copies"]
    assert [c["source"] for c in copies] == [0, -1, -1]
    assert copies[1] == {"box": [[0, 2], [0, 1]], "source": -1, "shift": [0, 4]}
    kept = assemble_slice_copies(_graph(True))
    assert [n["op"] for n in kept].count("copy_") == 3


class CircularConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, padding_mode="circular")

    def forward(self, x):
        return torch.relu(self.conv(x))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_a_circular_convolution_matches(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(2)
    module = CircularConv()
    cand = builtin_candidate(module, [torch.randn(4, 8, 32, 40)], host=False)
    got, want = outputs_on_the_gpu(cand, module, [torch.randn(4, 8, 32, 40)], tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)  # TF32 convolutions


class Shuffle(nn.Module):
    """ShuffleNet's channel shuffle as nn.ChannelShuffle (aten.channel_shuffle), between pointwise work."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.shuffle = nn.ChannelShuffle(groups)

    def forward(self, x):
        return self.shuffle(torch.relu(x)) + 1.0


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("groups,shape", [(2, (2, 8, 5, 6)), (3, (3, 12, 7)), (4, (2, 8, 2, 3, 4))])
def test_channel_shuffle_matches_pytorch_on_the_cpu(groups, shape, tmp_path):
    torch.manual_seed(1)
    module = Shuffle(groups)
    traced = graph.trace_module(module, [torch.randn(shape)])
    assert "channel_shuffle" in {n["op"] for n in traced}
    cand = builtin_candidate(module, [torch.randn(shape)], host=True)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        for batch in (shape[0], 4):
            fresh = torch.randn(batch, *shape[1:])
            torch.testing.assert_close(new(fresh), module(fresh), rtol=0, atol=0)


class NanToNum(nn.Module):
    """log of a signed input gives NaN and -inf; times a large scale, +inf too."""

    def __init__(self, **kw) -> None:
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return torch.nan_to_num(torch.log(x) * x.abs().pow(60.0), **self.kw) + 0.5


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("kw", [{}, {"nan": 1.5, "posinf": 7.0}, {"neginf": -3.0}])
def test_nan_to_num_matches_pytorch_on_the_cpu(kw, dtype, tmp_path):
    """Defaults are the storage dtype's largest finite values (fp16: 65504), as PyTorch's."""
    torch.manual_seed(3)
    module = NanToNum(**kw)
    x = torch.randn(4, 64).to(dtype)
    x[0, :4] = torch.tensor([0.0, -1.0, float("inf"), float("nan")])
    cand = builtin_candidate(module, [x], host=True)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        got, want = new(x), module(x)
    assert torch.isinf(module(x.float()) - 0.5).logical_not().all()  # no inf left (the case is exercised)
    torch.testing.assert_close(got, want, rtol=2e-3 if dtype == torch.float16 else 1e-5, atol=1e-5)
