"""The built-in coder: generated CUDA compiles, ModelNew is clean, and the arithmetic equals PyTorch's.

Numerics are checked without a GPU: the coder can target the CPU (`host=True`), where the .cu gains
`<kernel>_host` entry points running the very chunk functions the GPU kernels run, and ModelNew
calls those. The whole candidate (trace -> plan -> .cu + model_new.py) is then compared with the
reference module on CPU tensors.
"""

from __future__ import annotations

import inspect
import itertools
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.coder import codegen
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify.static_check import check_source
from stitchcuda.task import find_task, import_file

_ids = itertools.count()


pytestmark = pytest.mark.usefixtures("isolated_cache")


def plan_of(module: nn.Module, inputs: list) -> object:
    p = planner.plan_graph(graph.trace_module(module, inputs))
    assert p.supported, p.unsupported
    return p


def candidate(module: nn.Module, inputs: list, *, host: bool = False):
    return coder_builtin.build_candidate(plan_of(module, inputs), type(module), title="test", host=host)


def run_host(module: nn.Module, inputs: list, folder: Path):
    """Write the CPU-targeted candidate, import it, load the reference's weights, run it."""
    cand = candidate(module, inputs, host=True)
    path = cand.write(folder)
    mod = import_file(path, name=f"_cand_{next(_ids)}")
    new = mod.ModelNew(*_init_args(module))
    assert new.state_dict().keys() == module.state_dict().keys()
    new.load_state_dict(module.state_dict())
    return new(*inputs), cand


def _init_args(module: nn.Module) -> list:
    return list(getattr(module, "init_args", []))


def assert_same(ours, ref, **tol) -> None:
    ours = ours if isinstance(ours, tuple | list) else (ours,)
    ref = ref if isinstance(ref, tuple | list) else (ref,)
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref, strict=True)):
        assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape, a.dtype, b.dtype)
        torch.testing.assert_close(a, b, equal_nan=True, msg=lambda m, k=k: f"output {k}: {m}", **tol)


# ---------------------------------------------------------------------------------------------
# Modules


class SoftmaxEpilogue(nn.Module):
    def forward(self, x, b):
        s = torch.softmax(x, dim=1)
        return torch.sigmoid(s * 2 + b), torch.log_softmax(x, dim=-1) - 1.0


class EvalNorm(nn.Module):
    def __init__(self, dims: int = 2, features: int = 6, affine: bool = True):
        super().__init__()
        self.bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims](features, affine=affine)
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():  # statistics and an affine map that are not the identity
            self.bn.running_mean.copy_(torch.randn(features, generator=g))
            self.bn.running_var.copy_(torch.rand(features, generator=g) + 0.1)
            if affine:
                self.bn.weight.copy_(torch.randn(features, generator=g))
                self.bn.bias.copy_(torch.randn(features, generator=g))

    def forward(self, x):
        return torch.relu(self.bn(x)) * 2


class Ops(nn.Module):
    """Applies each function to (x, y) and returns all results: one kernel with many outputs."""

    def __init__(self, fns=()):
        super().__init__()
        self.fns = list(fns)

    def forward(self, x, y):
        return tuple(f(x, y) for f in self.fns)


# One entry per table row (and per variant that takes a different path in the table).
OPS = {
    "add": lambda x, y: x + y,
    "add_alpha": lambda x, y: torch.add(x, y, alpha=0.3),
    "add_scalar": lambda x, y: x + 1.5,
    "sub_alpha": lambda x, y: torch.sub(x, y, alpha=2),
    "rsub": lambda x, y: 1.0 - x,
    "mul": lambda x, y: x * y,
    "mul_scalar": lambda x, y: x * 0.1,
    "div": lambda x, y: x / y,
    "div_scalar": lambda x, y: x / 3.0,
    "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "remainder": lambda x, y: torch.remainder(x, y),
    "fmod": lambda x, y: torch.fmod(x, y),
    "neg": lambda x, y: -x,
    "abs": lambda x, y: x.abs(),
    "reciprocal": lambda x, y: x.reciprocal(),
    "square": lambda x, y: torch.square(x),
    "pow2": lambda x, y: x**2,
    "pow3": lambda x, y: x**3,
    "pow_half": lambda x, y: x**0.5,
    "pow_mhalf": lambda x, y: x**-0.5,
    "pow_m1": lambda x, y: x**-1,
    "pow_m2": lambda x, y: x**-2,
    "pow_generic": lambda x, y: x.abs() ** 1.7,
    "pow_tensor": lambda x, y: x.abs() ** y,
    "pow_scalar_base": lambda x, y: torch.pow(2.0, y),
    "sqrt": lambda x, y: x.sqrt(),
    "rsqrt": lambda x, y: x.rsqrt(),
    "sign": lambda x, y: x.sign(),
    "floor": lambda x, y: x.floor(),
    "ceil": lambda x, y: x.ceil(),
    "trunc": lambda x, y: x.trunc(),
    "round": lambda x, y: x.round(),
    "frac": lambda x, y: x.frac(),
    "addcmul": lambda x, y: torch.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda x, y: torch.addcdiv(x, x, y, value=0.5),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3),
    "lerp_big": lambda x, y: torch.lerp(x, y, 0.7),
    "maximum": lambda x, y: torch.maximum(x, y),
    "minimum": lambda x, y: torch.minimum(x, y),
    "fmax": lambda x, y: torch.fmax(x, y),
    "fmin": lambda x, y: torch.fmin(x, y),
    "atan2": lambda x, y: torch.atan2(x, y),
    "xlogy": lambda x, y: torch.xlogy(torch.relu(x), y.abs()),
    "hypot": lambda x, y: torch.hypot(x, y),
    "exp": lambda x, y: x.exp(),
    "exp2": lambda x, y: torch.exp2(x),
    "expm1": lambda x, y: torch.expm1(x),
    "log": lambda x, y: x.log(),
    "log2": lambda x, y: x.log2(),
    "log10": lambda x, y: x.log10(),
    "log1p": lambda x, y: torch.log1p(x),
    "sin": lambda x, y: x.sin(),
    "cos": lambda x, y: x.cos(),
    "tan": lambda x, y: x.tan(),
    "asin": lambda x, y: (x / 8).asin(),
    "acos": lambda x, y: (x / 8).acos(),
    "atan": lambda x, y: x.atan(),
    "sinh": lambda x, y: x.sinh(),
    "cosh": lambda x, y: x.cosh(),
    "tanh": lambda x, y: x.tanh(),
    "asinh": lambda x, y: x.asinh(),
    "acosh": lambda x, y: (x.abs() + 1).acosh(),
    "atanh": lambda x, y: (x / 8).atanh(),
    "erf": lambda x, y: torch.erf(x),
    "erfc": lambda x, y: torch.erfc(x),
    "relu": lambda x, y: torch.relu(x),
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.2),
    "prelu": lambda x, y: F.prelu(x, torch.full((1,), 0.25, device=x.device)),
    "sigmoid": lambda x, y: torch.sigmoid(x),
    "gelu": lambda x, y: F.gelu(x),
    "gelu_tanh": lambda x, y: F.gelu(x, approximate="tanh"),
    "silu": lambda x, y: F.silu(x),
    "mish": lambda x, y: F.mish(x),
    "softplus": lambda x, y: F.softplus(x),
    "softplus_beta": lambda x, y: F.softplus(x, beta=2.0, threshold=5.0),
    "elu": lambda x, y: F.elu(x, alpha=0.7),
    "celu": lambda x, y: F.celu(x, alpha=1.3),
    "selu": lambda x, y: F.selu(x),
    "hardtanh": lambda x, y: F.hardtanh(x, -2.0, 2.5),
    "relu6": lambda x, y: F.relu6(x),
    "hardsigmoid": lambda x, y: F.hardsigmoid(x),
    "hardswish": lambda x, y: F.hardswish(x),
    "hardshrink": lambda x, y: F.hardshrink(x, 0.5),
    "softshrink": lambda x, y: F.softshrink(x, 0.5),
    "threshold": lambda x, y: F.threshold(x, 0.1, 20.0),
    "softsign": lambda x, y: F.softsign(x),
    "clamp": lambda x, y: torch.clamp(x, -1.0, 1.0),
    "clamp_min": lambda x, y: torch.clamp(x, min=0.1),
    "clamp_max": lambda x, y: torch.clamp(x, max=0.1),
    "clamp_tensor": lambda x, y: torch.clamp(x, min=y),
    "eq": lambda x, y: (x == y).float(),
    "ne": lambda x, y: x != y,
    "gt": lambda x, y: x > 0.5,
    "ge": lambda x, y: (x >= y).float(),
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "logical": lambda x, y: torch.logical_xor(torch.logical_and(x > 0, y > 0), torch.logical_not(x < -1)),
    "logical_or": lambda x, y: torch.logical_or(x > 1, y > 1),
    "bitwise_bool": lambda x, y: ~((x > 0) & (y > 0)) | ((x > 1) ^ (y < -1)),
    "isnan": lambda x, y: torch.isnan(x.log()),
    "isinf": lambda x, y: torch.isinf(x.exp()),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "where_scalar": lambda x, y: torch.where(x > 0, x, 0.0),
    "masked_fill": lambda x, y: x.masked_fill(y > 0, -1.0),
    "to_half": lambda x, y: x.half(),
    "via_half": lambda x, y: x.half().float() * 3,
    "via_bf16": lambda x, y: x.bfloat16().float() - y,
    "zeros_like": lambda x, y: x + torch.zeros_like(y),
    "full_like": lambda x, y: x * torch.full_like(y, 2.5),
    "tensor_constant": lambda x, y: x * torch.tensor(2.5),
    "chain": lambda x, y: torch.tanh(F.silu(x) * torch.sigmoid(y) - 0.5) + x,
}  # fmt: skip


def sample(shape, seed: int) -> torch.Tensor:
    """Values in [-6, 6] plus the points where activations change branch."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g) * 12 - 6
    special = torch.tensor([0.0, -0.0, -3.0, 3.0, 6.0, -6.0, 0.5, -0.5, 2.5, -2.0, 20.0, 5.0, 0.1, 1.0, -1.0])
    flat = x.reshape(-1)
    flat[: special.numel()] = special[: flat.numel()]
    return x


@pytest.mark.parametrize("names", [list(OPS)[: len(OPS) // 2], list(OPS)[len(OPS) // 2 :]])
@pytest.mark.nvcc
@needs_nvcc
def test_every_table_entry_matches_torch_on_cpu(tmp_path, names):
    module = Ops(OPS[n] for n in names)
    x, y = sample((7, 19), 1), sample((7, 19), 2)  # 133 elements: vector chunks and a scalar tail
    ours, cand = run_host(module, [x, y], tmp_path)
    assert "stitch_pw0" in cand.files["fused_kernels.cu"]
    ref = module(x, y)
    wrong = []
    for name, a, b in zip(names, ours, ref, strict=True):
        try:
            assert a.dtype == b.dtype, f"dtype {a.dtype} != {b.dtype}"
            torch.testing.assert_close(a.float(), b.float(), rtol=1e-5, atol=1e-5, equal_nan=True)
        except AssertionError as e:
            wrong.append(f"{name}: {str(e).splitlines()[0]}")
    assert not wrong, "\n".join(wrong)


def test_table_covers_the_brief():
    required = (
        "add sub mul div neg abs relu leaky_relu sigmoid tanh exp log sqrt rsqrt pow gelu silu mish softplus "
        "elu hardtanh hardsigmoid hardswish clamp clamp_min clamp_max minimum maximum where reciprocal sin "
        "cos erf log1p expm1 _to_copy"
    ).split()
    assert not [op for op in required if op not in codegen.POINTWISE]


class BiasChain(nn.Module):
    def __init__(self, channels: int = 6, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.init_args = []
        self.bias = nn.Parameter(torch.randn(channels, 1, 1, dtype=dtype))
        self.scale = nn.Parameter(torch.randn(channels, dtype=dtype))
        self.register_buffer("shift", torch.randn((), dtype=dtype))

    def forward(self, x):
        y = F.gelu(x + self.bias) * self.scale.view(1, -1, 1, 1)
        return torch.clamp(y - self.shift, -1.0, 1.0) * torch.sigmoid(x)


class Views(nn.Module):
    """Views of inputs and of intermediates, outputs of several shapes, returned views."""

    def forward(self, x, row):
        t = x.transpose(1, 2)  # read through strides
        a = t * row.view(1, 1, -1)  # a view of a smaller input, broadcast
        b = (x * 2).reshape(-1)[1:9]  # slice of a flattened intermediate
        c = (row + 1).expand(3, -1)  # broadcast of a small intermediate, returned as a view
        return a, b, c, a.permute(2, 0, 1), a[:, :2]


class Reshapes(nn.Module):
    """A slice of a permuted intermediate, flattened: views over an intermediate's traced layout."""

    def forward(self, x, w):
        return (x.transpose(0, 1) * w.unsqueeze(0))[1:].reshape(-1) + 1, x.reshape(2, -1).t() * 3


class Edges(nn.Module):
    """A 0-dim input, a 0-dim result, and an empty tensor."""

    def forward(self, s, x, e):
        return s * 2 + 1, torch.sigmoid(x - s), e.exp()


class Nested(nn.Module):
    """Parameters in submodules (dotted state_dict keys, a numeric one) and a non-persistent buffer."""

    def __init__(self, n: int = 5, *, slope: float = 0.1):
        super().__init__()
        self.init_args = [n]
        self.act = nn.PReLU(n)
        self.blocks = nn.ModuleList([nn.Module()])
        self.blocks[0].gain = nn.Parameter(torch.randn(n))
        self.register_buffer("unused", torch.zeros(2), persistent=False)
        self.slope = slope

    def forward(self, x, k: float = 2.0):
        return F.leaky_relu(self.act(x) * self.blocks[0].gain, self.slope) * k


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize(
    "module, inputs",
    [
        (BiasChain(), [torch.randn(2, 6, 5, 7)]),
        (Views(), [torch.randn(3, 4, 5), torch.randn(4)]),
        (Reshapes(), [torch.randn(3, 4), torch.randn(3)]),
        (Edges(), [torch.tensor(0.3), torch.randn(5, 3), torch.randn(0, 4)]),
        (Nested(), [torch.randn(4, 5)]),
    ],
    ids=["bias-chain", "views", "reshapes", "edges", "nested-state"],
)
def test_whole_candidate_matches_reference_on_cpu(tmp_path, module, inputs):
    ours, _ = run_host(module, inputs, tmp_path)
    assert_same(ours, module(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types_compute_in_fp32_and_round_once(tmp_path, dtype):
    module = BiasChain(dtype=dtype)
    x = torch.randn(2, 6, 5, 7, dtype=dtype)
    ours, _ = run_host(module, [x], tmp_path)
    ref32 = BiasChain(dtype=torch.float32)
    ref32.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
    want = ref32(x.float()).to(dtype)  # the exact result, rounded once
    assert ours.dtype == dtype
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(ours.float(), want.float(), rtol=eps, atol=eps)


class Mixed(nn.Module):
    """fp16 activations with an fp32 parameter: type promotion makes the result fp32."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return torch.relu(x) * self.w, (x > 0)


@pytest.mark.nvcc
@needs_nvcc
def test_mixed_dtypes_and_bool_outputs(tmp_path):
    module = Mixed()
    x = torch.randn(3, 8, dtype=torch.float16)
    ours, _ = run_host(module, [x], tmp_path)
    assert_same(ours, module(x), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_unaligned_inputs_take_the_scalar_path(tmp_path):
    module = Ops([OPS["chain"]])
    x, y = sample((16, 8), 3), sample((16, 8), 4)
    cand = candidate(module, [x, y], host=True)
    assert "sc_aligned(in0, 4)" in cand.files["fused_kernels.cu"]
    mod = import_file(cand.write(tmp_path), name=f"_cand_{next(_ids)}")
    new = mod.ModelNew()
    # Contiguous views at an odd element offset: not 16-byte aligned, so not loadable as float4.
    xs, ys = torch.cat([x.new_zeros(1), x.reshape(-1)])[1:], torch.cat([y.new_zeros(1), y.reshape(-1)])[1:]
    xs, ys = xs.view(16, 8), ys.view(16, 8)
    assert xs.data_ptr() % 16 and xs.is_contiguous()
    assert_same(new(xs, ys), module(x, y), rtol=1e-5, atol=1e-5)
    # A non-contiguous input is made contiguous first.
    xt = x.t().contiguous().t()
    assert_same(new(xt, y), module(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.nvcc
@needs_nvcc
def test_model_new_rejects_other_shapes_and_devices(tmp_path):
    module = BiasChain()
    x = torch.randn(2, 6, 5, 7)
    _, cand = run_host(module, [x], tmp_path)
    mod = import_file(tmp_path / "model_new.py", name=f"_cand_{next(_ids)}")
    new = mod.ModelNew()
    with pytest.raises(ValueError, match="generated for x of shape"):
        new(torch.randn(2, 6, 5, 8))
    with pytest.raises(ValueError, match="float32"):
        new(x.double())


# ---------------------------------------------------------------------------------------------
# The CUDA source compiles for the GPU we tune for


class Unary(nn.Module):
    def forward(self, x):
        return F.hardswish(F.softplus(x) - torch.rsqrt(x.abs() + 1)) ** 2


class Binary(nn.Module):
    def forward(self, x, y):
        return torch.where(x > y, F.mish(x), F.elu(y)) / (1 + torch.exp(-x)), torch.maximum(x, y)


@pytest.mark.nvcc
@needs_nvcc
def test_generated_cuda_compiles_for_sm90(tmp_path):
    cases = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        cases += [
            (Unary(), [torch.randn(64, 1000, dtype=dtype)]),
            (Binary(), [torch.randn(16, 33, dtype=dtype), torch.randn(33, dtype=dtype)]),
            (BiasChain(dtype=dtype), [torch.randn(4, 6, 9, 9, dtype=dtype)]),
        ]
    cases += [(Views(), [torch.randn(3, 4, 5), torch.randn(4)]), (Mixed(), [torch.randn(3, 8, dtype=torch.float16)])]
    # Beyond 2^32 elements indices take the 64-bit path; tracing costs nothing (fake tensors).
    cases += [(BiasChain(channels=64), [torch.empty(()).expand(600, 64, 512, 256)])]
    # All cases' kernels in one source: one nvcc run instead of one per case.
    kernels = []
    for k, (module, inputs) in enumerate(cases):
        p = plan_of(module, inputs)
        kernels += [codegen.lower(p.graph, g, f"case{k}_pw{j}") for j, g in enumerate(p.groups)]
    assert any(k.numel > 2**32 for k in kernels)
    src = tmp_path / "all.cu"
    src.write_text(codegen.render(kernels))
    assert runtime.build([src], arch="sm_90").library.exists()


def test_device_candidates_have_no_host_entry_points():
    cand = candidate(BiasChain(), [torch.randn(2, 6, 5, 7)])
    cu = cand.files[coder_builtin.CU_FILE]
    assert 'extern "C" int stitch_pw0(' in cu and "stitch_pw0_host" not in cu
    assert "_host" not in cand.files[coder_builtin.PY_FILE]


def test_generated_model_passes_the_static_check():
    for module, inputs in [
        (BiasChain(), [torch.randn(2, 6, 5, 7)]),
        (Views(), [torch.randn(3, 4, 5), torch.randn(4)]),
        (Nested(), [torch.randn(4, 5)]),
        (Ops(OPS.values()), [torch.randn(4, 4), torch.randn(4, 4)]),
    ]:
        source = candidate(module, inputs).files[coder_builtin.PY_FILE]
        assert check_source(source, reference_classes=(type(module).__name__, "Model")) == []
        compile(source, "model_new.py", "exec")


def test_model_new_keeps_the_reference_signatures_and_state(tmp_path, monkeypatch):
    module = Nested()
    cand = candidate(module, [torch.randn(4, 5)])
    # No build: only the class is looked at (the custom op's name reads the library's path).
    monkeypatch.setattr(runtime, "load", lambda *a, **k: SimpleNamespace(path=tmp_path / "unbuilt.so"))
    ModelNew = import_file(cand.write(tmp_path), name=f"_cand_{next(_ids)}").ModelNew
    new = ModelNew(5, slope=0.1)
    assert str(inspect.signature(ModelNew.__init__)) == "(self, n=5, *, slope=0.1)"
    assert str(inspect.signature(ModelNew.forward)) == "(self, x, k=2.0)"
    ref_sd, new_sd = module.state_dict(), new.state_dict()
    assert ref_sd.keys() == new_sd.keys()
    assert all(ref_sd[k].shape == new_sd[k].shape and ref_sd[k].dtype == new_sd[k].dtype for k in ref_sd)
    assert [b for b, _ in new.named_buffers()] == ["unused"]  # kept, and kept out of the state_dict


def test_code_returns_none_for_unsupported_plans(tmp_path):
    src = tmp_path / "pdist.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x):\n        return torch.relu(torch.nn.functional.pdist(x.flatten(1)))\n"
        "def get_inputs():\n    return [torch.randn(1, 3, 8, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    task = find_task(src)
    p = planner.plan(task)
    assert not p.supported
    assert coder_builtin.code(task, p) is None


def test_code_from_a_task_file(tmp_path):
    src = tmp_path / "act.py"
    src.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, alpha: float = 1.0):\n        super().__init__()\n        self.alpha = alpha\n"
        "    def forward(self, x):\n        return torch.nn.functional.elu(x, alpha=self.alpha)\n"
        "def get_inputs():\n    return [torch.randn(4096, 393216)]\n"  # 6 GiB, never materialised
        "def get_init_inputs():\n    return [0.5]\n"
    )
    task = find_task(src)
    cand = coder_builtin.code(task, planner.plan(task), feedback=None)
    assert cand is not None and cand.origin == "builtin"
    assert set(cand.files) == {coder_builtin.CU_FILE, coder_builtin.PY_FILE}
    assert "def __init__(self, alpha=1.0):" in cand.files[coder_builtin.PY_FILE]
    # Elementwise: every sample on its own, so the batch (4096) is dynamic and the rest fixed.
    assert cand.batch == 4096 and "x.shape[1:] != (393216,)" in cand.files[coder_builtin.PY_FILE]
    assert "0.5f" in cand.files[coder_builtin.CU_FILE]


# ---------------------------------------------------------------------------------------------
# On a GPU: the real kernels against the reference


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    "module, inputs, tol",
    [
        (Ops(OPS.values()), [sample((257, 129), 5), sample((257, 129), 6)], 1e-4),
        (BiasChain(), [torch.randn(8, 6, 33, 65)], 1e-4),
        (BiasChain(dtype=torch.float16), [torch.randn(8, 6, 33, 64, dtype=torch.float16)], 2e-3),
        (BiasChain(dtype=torch.bfloat16), [torch.randn(8, 6, 32, 64, dtype=torch.bfloat16)], 2e-2),
        (Views(), [torch.randn(3, 4, 5), torch.randn(4)], 1e-4),
        (Reshapes(), [torch.randn(300, 40), torch.randn(300)], 1e-4),
        (Nested(), [torch.randn(64, 5)], 1e-4),
        (Mixed(), [torch.randn(1000, 8, dtype=torch.float16)], 1e-4),
        (EvalNorm().eval(), [torch.randn(8, 6, 33, 65)], 1e-4),
        (SoftmaxEpilogue(), [torch.randn(8, 33, 17, 9) * 20, torch.randn(33, 1, 1)], 1e-4),
    ],
    ids=["all-ops", "bias-fp32", "bias-fp16", "bias-bf16", "views", "reshapes", "nested", "mixed", "eval-bn",
         "softmax-epilogue"],
)
def test_model_new_matches_reference_on_gpu(tmp_path, module, inputs, tol, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    cand = candidate(module, inputs)
    mod = import_file(cand.write(tmp_path), name=f"_cand_{next(_ids)}")
    module = module.cuda()
    new = mod.ModelNew(*_init_args(module)).cuda()
    new.load_state_dict(module.state_dict())
    args = [t.cuda() for t in inputs]
    assert_same(new(*args), module(*args), rtol=tol, atol=tol)
    # Unaligned (scalar path) and non-contiguous inputs give the same results.
    shifted = [torch.cat([t.new_zeros(1), t.reshape(-1)])[1:].view(t.shape) for t in args]
    assert_same(new(*shifted), module(*args), rtol=tol, atol=tol)
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_replays_follow_new_values_at_the_same_addresses(tmp_path, monkeypatch):
    """The graph path keys on buffer addresses: after it starts replaying, new values written into
    the same input tensors must still give new, correct outputs (nothing cached but the launches)."""
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    module = TwoKernels().cuda()
    x = torch.randn(33, 65, device="cuda")
    cand = candidate(TwoKernels(), [x.cpu()])
    new = import_file(cand.write(tmp_path), name=f"_cand_{next(_ids)}").ModelNew().cuda()
    for step in range(8):  # eager for the first calls, captured on the third, replayed after
        x.copy_(torch.randn(33, 65, device="cuda") * (step + 1))
        assert_same(new(x), module(x), rtol=1e-4, atol=1e-4)
    torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


@needs_nvcc
def test_scalar_forward_arguments_are_checked_not_ignored(tmp_path):
    class Scale(nn.Module):
        def forward(self, a, s: float):
            return a * s

    a = torch.randn(4, 5)
    cand = coder_builtin.build_candidate(plan_of(Scale(), [a, 3.14]), Scale, title="t", host=True)
    mod = import_file(cand.write(tmp_path), name=f"_cand_{next(_ids)}")
    new = mod.ModelNew()
    torch.testing.assert_close(new(a, 3.14), a * 3.14)
    with pytest.raises(ValueError, match="s=3.14"):
        new(a, 2.0)


class TwoKernels(nn.Module):
    """A pointwise kernel, then a scan (which takes no prologue)."""

    def forward(self, x):
        return torch.cumsum(torch.relu(x * 2 + 1), dim=1)


@pytest.mark.nvcc
@needs_nvcc
def test_whole_forward_is_one_call_and_a_cuda_graph_when_it_has_several_kernels(tmp_path):
    """forward hands every buffer to stitch_forward in one ctypes call; with more than one kernel,
    or one library call (whose host cost a replay saves), it goes through stitch_forward_graph
    (capture after repeats, replay; eager on any failure). Built for sm_90 here: the graph path
    must compile and export both entry points."""
    import subprocess

    many = candidate(TwoKernels(), [torch.randn(33, 65)])
    one = candidate(Unary(), [torch.randn(64, 1000)])
    library = candidate(nn.Linear(64, 32, bias=False), [torch.randn(16, 64)])
    assert "_lib.call_all('stitch_forward_graph', [" in many.files[coder_builtin.PY_FILE]
    assert "_lib.call_all('stitch_forward', [" in one.files[coder_builtin.PY_FILE]
    assert "stitch_forward_graph" not in one.files[coder_builtin.CU_FILE]
    assert library.files[coder_builtin.PY_FILE].count("_lib.call_all('stitch_forward_graph', [") == 1
    assert "stitch_forward_graph" in library.files[coder_builtin.CU_FILE]
    assert many.files[coder_builtin.PY_FILE].count("_lib.call") == 1  # not one call per kernel
    src = tmp_path / "many.cu"
    src.write_text(many.files[coder_builtin.CU_FILE])
    lib = runtime.build([src], arch="sm_90").library
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if line.split()[-2:-1] == ["T"]}
    assert {"stitch_forward", "stitch_forward_graph"} <= exported


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize(
    "args, shape",
    [((2, 6), (4, 6, 9, 11)), ((1, 5), (7, 5)), ((3, 3, False), (2, 3, 4, 5, 6))],
    ids=["2d", "1d", "3d-no-affine"],
)
def test_eval_batch_norm_is_one_pointwise_pass(tmp_path, args, shape):
    """Inference-mode BatchNorm becomes pointwise ops fused with what follows (one kernel), with
    the module's own running statistics, and matches PyTorch on the CPU host path."""
    module = EvalNorm(*args).eval()
    x = torch.randn(*shape)
    plan = plan_of(module, [x])
    assert [g.kind for g in plan.groups] == ["pointwise"], plan.groups
    ours, _ = run_host(module, [x], tmp_path)
    assert_same(ours, module(x), rtol=1e-5, atol=1e-5)


def test_training_batch_norm_keeps_its_kernel_and_conv_bias_folds_into_eval_bn():
    class ConvBn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    x = torch.randn(2, 3, 16, 16)
    train = plan_of(ConvBn().train(), [x])
    assert [g.kind for g in train.groups if g.kind == "kernel"] == ["kernel", "kernel"]  # conv, batch norm
    evl = plan_of(ConvBn().eval(), [x])
    # One kernel: the convolution, bias + norm + relu its epilogue (no cuDNN form: run in its launcher).
    assert [g.kind for g in evl.groups] == ["kernel"], [g.note for g in evl.groups]
    ops = [n["op"] for n in evl.graph if n["name"] in evl.groups[0].detail["epilogue"]["members"]]
    assert ops.count("rsqrt") == 1 and "relu" in ops and "native_batch_norm" not in [n["op"] for n in evl.graph]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("scale", [1.0, 60.0], ids=["unit", "large"])
@pytest.mark.parametrize("whole", ["1", "0"], ids=["default", "split"])
def test_softmax_with_pointwise_readers_runs_in_their_kernel(tmp_path, monkeypatch, scale, whole):
    """softmax/log_softmax read only by pointwise ops: a logsumexp kernel per row, then exp(x - lse)
    inside the pointwise chain; never stored. Large inputs check the max shift inside logsumexp.
    By default softmaxes are kept whole where they take their readers as an epilogue; here one
    pointwise kernel reads both, so neither can, and plan_graph splits them as SOFTMAX_WHOLE=0 does."""
    from stitchcuda.agents.plan import planner

    monkeypatch.setenv(planner.SOFTMAX_WHOLE_ENV, whole)
    module = SoftmaxEpilogue()
    x, b = torch.randn(3, 7, 5, 9) * scale, torch.randn(7, 1, 1)
    plan = plan_of(module, [x, b])
    kinds = sorted(g.kind for g in plan.groups)
    assert kinds == ["kernel", "kernel", "pointwise"] or kinds == ["kernel", "kernel", "pointwise", "pointwise"], plan.groups
    ops = [n["op"] for n in plan.graph]
    assert "_softmax" not in ops and "_log_softmax" not in ops and ops.count("logsumexp") == 2
    ours, _ = run_host(module, [x, b], tmp_path)
    assert_same(ours, module(x, b), rtol=1e-5, atol=1e-5)
