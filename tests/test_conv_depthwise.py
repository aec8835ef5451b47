"""Depthwise convolutions (groups == input channels) through our own direct NCHW kernel
(agents/coder/cuda/depthwise.cuh, emit_conv._depthwise) instead of cuDNN behind layout copies; on
by default, STITCHCUDA_CONV_DEPTHWISE=0 turns it off, =contend makes it cuDNN's first-call contender.

Here: which convolutions take it (and which stay with cuDNN), the tile it picks, the planner
leaving them NCHW, the kernel's own code run on the CPU (its NAME_host entry runs the GPU's two
phases, block by block and thread by thread) against F.conv2d, the tile math transliterated, sm_90
builds. On a GPU: each candidate matches its module."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents.coder import emit_conv, kernels
from stitchcuda.agents.coder.model_new import CU_FILE, PY_FILE
from stitchcuda.task import import_file


@pytest.fixture(autouse=True)
def _prologues_default(monkeypatch):
    """Depthwise prologues are on by default (planner.CONV_PROLOGUES_ENV): these tests run the default
    whatever the caller's environment says; test_the_switch sets its own value."""
    from stitchcuda.agents.plan import planner

    monkeypatch.delenv(planner.CONV_PROLOGUES_ENV, raising=False)


class Depthwise(nn.Module):
    def __init__(self, c: int, mult: int = 1, k=3, stride=1, padding=0, dilation=1, bias=False, then_relu=False):
        super().__init__()
        self.conv = nn.Conv2d(c, c * mult, k, stride=stride, padding=padding, dilation=dilation, groups=c, bias=bias)
        self.then_relu = then_relu

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y) if self.then_relu else y


# (name, constructor keywords, input shape): multipliers, strides, dilations, padding, asymmetric
# kernels, bias, borders that cut tiles, a pointwise op after it.
CASES = [
    ("3x3", dict(c=4), (2, 4, 26, 66)),
    ("multiplier 2, bias", dict(c=3, mult=2, bias=True), (2, 3, 34, 40)),
    ("stride 2, padding 1", dict(c=4, stride=2, padding=1), (1, 4, 31, 120)),
    ("dilation 2, 3x7", dict(c=2, k=(3, 7), dilation=2, padding=(1, 3)), (2, 2, 24, 70)),
    ("5x5 stride (1, 3), relu after", dict(c=5, k=5, stride=(1, 3), padding=2, then_relu=True), (1, 5, 28, 190)),
    ("64 x 64 plane: 8 rows a thread", dict(c=2, k=(3, 5), padding=(1, 2)), (1, 2, 64, 64)),
    # MobileNet's 56 x 56 planes: 7 rows a thread cover the plane's height exactly (offered since
    # 2026-11-29; it took 1 row a thread before, 2 outputs a thread with 9 weights loaded a plane).
    ("56 x 56 plane: 7 rows a thread", dict(c=3, padding=1), (2, 3, 56, 56)),
    ("40 x 40 plane: 5 rows a thread", dict(c=2, mult=2, padding=1, bias=True), (1, 2, 40, 40)),
]


def _params(module: Depthwise, shape) -> emit_conv.ConvParams:
    c = module.conv
    return emit_conv.conv_params(shape, tuple(c.weight.shape), c.stride, c.padding, c.dilation, False, [0], c.groups)


@pytest.fixture(autouse=True)
def _default(monkeypatch):
    monkeypatch.delenv(emit_conv.DEPTHWISE_ENV, raising=False)


def test_turned_off_a_depthwise_convolution_stays_with_cudnn(monkeypatch):
    module, x = Depthwise(c=4), torch.randn(2, 4, 26, 66)
    assert "sc_dw_conv_run" in builtin_candidate(module, [x], host=False).files[CU_FILE]
    monkeypatch.setenv(emit_conv.DEPTHWISE_ENV, "0")
    cand = builtin_candidate(module, [x], host=False)
    assert "sc_dw_conv_run" not in cand.files[CU_FILE] and "sc_conv_run(" in cand.files[CU_FILE]


@pytest.mark.parametrize("name,kw,shape", CASES)
def test_a_depthwise_convolution_runs_the_direct_kernel_and_stays_nchw(name, kw, shape):
    torch.manual_seed(0)
    module = Depthwise(**kw)
    cand = builtin_candidate(module, [torch.randn(shape)], host=False)
    src = cand.files[CU_FILE]
    # (A ReLU after it is computed as the kernel stores: the launcher that takes an epilogue.)
    direct = "sc_dw_conv_run<float, stitch_k0_geom>(stitch_k0_spec" in src or "sc_dw_conv_launch<float, stitch_k0_geom>" in src
    assert direct and "sc_conv_run(" not in src, cand.notes
    assert any("depthwise, direct" in n for n in cand.notes), cand.notes
    assert "(channels-last result)" not in " ".join(cand.notes)
    # No cuDNN linked for a depthwise-only module.
    assert '_lib = load_kernels(Path(__file__).with_name("fused_kernels.cu"), [])' in cand.files[PY_FILE]


def test_grouped_but_not_depthwise_and_oversized_tiles_stay_with_cudnn():
    grouped = emit_conv.conv_params((2, 8, 20, 20), (8, 2, 3, 3), 1, 0, 1, False, [0], 4)
    assert not emit_conv.depthwise_direct(grouped, "float32")
    dense = emit_conv.conv_params((2, 8, 20, 20), (8, 8, 3, 3), 1, 0, 1, False, [0], 1)
    assert not emit_conv.depthwise_direct(dense, "float32")
    # A 31x31 kernel: more taps than the kernel keeps in registers.
    huge = emit_conv.conv_params((1, 4, 300, 300), (4, 1, 31, 31), 1, 0, 1, False, [0], 4)
    assert not emit_conv.depthwise_direct(huge, "float32")
    # A 9x9 kernel at dilation 24 needs at least a (7 + 192 + 1) x (31 + 192 + 1) tile: beyond 48 KB.
    wide = emit_conv.conv_params((1, 4, 300, 300), (4, 1, 9, 9), 1, 0, 24, False, [0], 4)
    assert emit_conv.dw_geom(wide) is None and not emit_conv.depthwise_direct(wide, "float32")
    # A 14 x 14 output plane (MobileNet's late layers) fills 38% of the smallest tile (8 x 32) over
    # it, a 512 x 2 strip 6%: cuDNN's.
    small = emit_conv.conv_params((10, 512, 14, 14), (512, 1, 3, 3), 1, 1, 1, False, [0], 512)
    assert not emit_conv.depthwise_direct(small, "float32")
    strip = emit_conv.conv_params((2, 8, 514, 4), (8, 1, 3, 3), 1, 0, 1, False, [0], 8)
    assert not emit_conv.depthwise_direct(strip, "float32")
    big = emit_conv.conv_params((16, 64, 512, 512), (64, 1, 3, 3), 1, 0, 1, False, [0], 64)  # level1/82's
    assert emit_conv.depthwise_direct(big, "float32")
    transposed = emit_conv.conv_params((2, 4, 10, 10), (4, 1, 3, 3), 1, 0, 1, True, [0], 4)
    assert not emit_conv.depthwise_direct(transposed, "float32")
    one_d = emit_conv.conv_params((2, 4, 50), (4, 1, 3), 1, 0, 1, False, [0], 4)
    assert not emit_conv.depthwise_direct(one_d, "float32")
    assert emit_conv.depthwise_direct(_params(Depthwise(4), (2, 4, 26, 66)), "bfloat16")
    assert not emit_conv.depthwise_direct(big, "float64")


def test_the_tile_is_the_largest_that_covers_the_plane_nearly_as_well_as_the_best():
    def geom(shape, k=3, stride=1):
        return emit_conv.dw_geom(emit_conv.conv_params(shape, (shape[1], 1, k, k), stride, 0, 1, False, [0], shape[1]))

    # 510 x 510 outputs: 64 x 64 tiles cover 512 x 512 (99.2% inside), every smaller one no better.
    g = geom((16, 64, 512, 512))
    assert (g.rows, g.columns, g.out_tile, g.tile) == (8, 2, (64, 64), (66, 66)) and g.fill > 0.99
    # 54 x 54: 64 x 64 would fill 71%; 56 x 64 (R = 7) fills 96% of the rows, 84% of the columns, as
    # 8 x 64 does. The largest within 5 points of the best.
    g = geom((2, 8, 56, 56))
    fills = {(r, q): 54 * 54 / (-(-54 // (8 * r)) * 8 * r * -(-54 // (32 * q)) * 32 * q)
             for r in emit_conv.DW_ROWS for q in emit_conv.DW_COLUMNS}
    assert abs(g.fill - fills[g.rows, g.columns]) < 1e-12 and g.fill >= max(fills.values()) - 0.05
    assert all(fills[r, q] < max(fills.values()) - 0.05 for r, q in fills if r * q > g.rows * g.columns)
    # 81 x 18 outputs: the best tile (8 x 32) fills 51.8%, a larger one within 5 points 47.5%: the
    # choice stays at half or more, so the direct kernel takes it (its rule reads the chosen fill).
    g = geom((1, 4, 83, 20))
    assert g.fill >= 0.5 and (g.rows, g.columns) == (1, 1)
    assert emit_conv.depthwise_direct(emit_conv.conv_params((1, 4, 83, 20), (4, 1, 3, 3), 1, 0, 1, False, [0], 4),
                                      "float32")
    # Stride 2 with 64 x 64 outputs would stage 129 x 129 floats (65 KB): a smaller tile then.
    g = geom((4, 8, 260, 260), stride=2)
    assert emit_conv.dw_tile_bytes(g.tile, 2) <= emit_conv.DW_SMEM_BYTES and g.rows * g.columns < 16
    # Two tiles a block, each row padded to whole phases: 2 * 4 * IH * ceil(IW / SW) * SW bytes.
    assert emit_conv.dw_tile_bytes((35, 131), 2) == 2 * 4 * 35 * 132
    assert not emit_conv.depthwise_direct(_params(Depthwise(4), (2, 4, 26, 66)), "float64")


def test_rows_a_thread_cover_the_plane_height():
    """The 56 x 56 and 40 x 40 cases of CASES run 7 and 5 rows a thread (a tile of 56 or 40 rows)."""
    rows = {name: emit_conv.dw_geom(_params(Depthwise(**kw), shape)).rows for name, kw, shape in CASES}
    assert rows["56 x 56 plane: 7 rows a thread"] == 7 and rows["40 x 40 plane: 5 rows a thread"] == 5, rows
    assert rows["64 x 64 plane: 8 rows a thread"] == 8, rows


def _simulate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, p: emit_conv.ConvParams) -> torch.Tensor:
    """depthwise.cuh's kernel, block by block: the input tile staged with zeros outside the image,
    each row's columns by phase (column % stride), then each thread's R x Q outputs, its input rows
    read once each and added into every output they touch (same index math)."""
    n, c, h, wd = p.x
    oc, oh, ow = p.y[1:]
    kh, kw = p.w[2:]
    (sh, sw), (ph, pw), (dh, dw) = p.stride, p.pad, p.dilation
    g = emit_conv.dw_geom(p)
    th_, tw_ = g.out_tile
    tile_h, tile_w = g.tile
    phase_w = -(-tile_w // sw)  # sc_dw_geom::PW
    row_w = phase_w * sw  # sc_dw_geom::ROW
    rin = (g.rows - 1) * sh + (kh - 1) * dh + 1
    tiles_w, tiles_h = -(-ow // tw_), -(-oh // th_)
    y = torch.full((n, oc, oh, ow), float("nan"), dtype=torch.float64)
    xf, wf = x.double().reshape(-1), w.double().reshape(-1)
    mult = oc // c
    for block in range(tiles_w * tiles_h):
        ty0, tx0 = (block // tiles_w) * th_, (block % tiles_w) * tw_
        iy0, ix0 = ty0 * sh - ph, tx0 * sw - pw
        for plane in range(n * oc):
            nn_, o = divmod(plane, oc)
            base = (nn_ * c + o // mult) * h * wd
            tile = torch.full((tile_h * row_w,), float("nan"), dtype=torch.float64)  # padding never read
            for r in range(tile_h):
                for col in range(tile_w):
                    gy, gx = iy0 + r, ix0 + col
                    at = r * row_w + (col % sw) * phase_w + col // sw  # sc_dw_geom::col
                    tile[at] = xf[base + gy * wd + gx] if 0 <= gy < h and 0 <= gx < wd else 0.0
            wr = wf[o * kh * kw:(o + 1) * kh * kw]
            for ty in range(8):
                ly0 = ty * g.rows
                for tx in range(32):
                    for q in range(g.columns):
                        lx = tx + 32 * q
                        if tx0 + lx >= ow:
                            continue
                        acc = [float(b[o]) if b is not None else 0.0] * g.rows
                        at = (ly0 * sh) * row_w
                        for r in range(rin):
                            # sc_dw_geom::tap: staged column lx * sw + j * dw, by its phase
                            v = [float(tile[at + r * row_w + (j * dw) % sw * phase_w + lx + j * dw // sw])
                                 for j in range(kw)]
                            for out_row in range(g.rows):
                                d = r - out_row * sh
                                if d >= 0 and d % dh == 0 and d // dh < kh:
                                    for j in range(kw):
                                        acc[out_row] += v[j] * float(wr[(d // dh) * kw + j])
                        for out_row in range(g.rows):
                            if ty0 + ly0 + out_row < oh:
                                y[nn_, o, ty0 + ly0 + out_row, tx0 + lx] = acc[out_row]
    return y


@pytest.mark.parametrize("name,kw,shape", CASES[:4])
def test_the_kernels_tile_and_index_math_computes_the_convolution(name, kw, shape):
    torch.manual_seed(1)
    module = Depthwise(**kw).double()
    x = torch.randn(shape, dtype=torch.float64)
    c = module.conv
    got = _simulate(x, c.weight.detach(), None if c.bias is None else c.bias.detach(), _params(module, shape))
    with torch.no_grad():
        want = c(x)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def _model_new(cand, module: Depthwise, kw: dict, folder) -> nn.Module:
    """The candidate's ModelNew (its constructor takes the reference's arguments), with its weights."""
    mod = import_file(cand.write(folder), name=f"_dw_{folder.name}")
    new = mod.ModelNew(**kw)
    new.load_state_dict(module.state_dict())
    return new


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name,kw,shape", CASES)
def test_the_kernels_own_code_on_the_cpu_matches_the_module(name, kw, shape, dtype, tmp_path):
    """The whole candidate built for the CPU: ModelNew calls the kernel's host entry, which runs
    the very stage/output functions the GPU kernel runs (depthwise.cuh)."""
    torch.manual_seed(2)
    module = Depthwise(**kw)
    x = torch.randn(shape)
    cand = builtin_candidate(module.to(dtype), [x.to(dtype)], host=True)
    assert "sc_dw_conv_host<" in cand.files[CU_FILE] or "sc_dw_conv_host_rd<" in cand.files[CU_FILE]
    new = _model_new(cand, module, kw, tmp_path / f"h{abs(hash((name, str(dtype))))}")
    with torch.no_grad():
        got = new(x.to(dtype))
        # The reference in fp32 on the same (rounded) values: the kernel accumulates in fp32.
        want = module.float()(x.to(dtype).float())
    assert got.dtype == dtype and got.shape == want.shape
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    else:  # one rounding of the fp32 sum to the storage type
        torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


@pytest.mark.nvcc
@needs_nvcc
def test_depthwise_candidates_build_for_sm90(tmp_path):
    for k, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16)):
        torch.manual_seed(0)
        module = Depthwise(c=3, mult=2, bias=True).to(dtype)
        cand = builtin_candidate(module, [torch.randn(2, 3, 34, 40, dtype=dtype)], host=False)
        src = tmp_path / f"dw{k}.cu"
        src.write_text(cand.files[CU_FILE])
        result = runtime.build([src], arch="sm_90")
        # The prelude's grid helper goes unused in a .cu without pointwise kernels (nvcc's #177);
        # any other warning is a defect. (The prelude stays as it is: recorded verdicts key on it.)
        warnings = [line for line in result.log.lower().splitlines() if "warning #" in line and '"sc_grid"' not in line]
        assert result.library.exists() and not warnings, result.log


@needs_nvcc
def test_as_cudnns_contender_it_builds_clean_for_sm90(tmp_path, monkeypatch):
    """STITCHCUDA_CONV_DEPTHWISE=contend: cuDNN's launcher carries the depthwise kernel as its
    first-call contender (fp32 without bias); a biased one keeps the direct kernel in cuDNN's place."""
    from conftest import assert_builds_clean_for_sm90, cudnn_include_or_skip

    include = cudnn_include_or_skip()
    monkeypatch.setenv(emit_conv.DEPTHWISE_ENV, "contend")
    torch.manual_seed(0)
    module = Depthwise(c=4, k=5, stride=2, padding=2)
    cand = builtin_candidate(module, [torch.randn(2, 4, 130, 200)], host=False)
    src = cand.files[CU_FILE]
    assert "sc_conv_run_ig(spec, state, ig_state, in0, in1, nullptr, out0, stitch_k0_dw, stream)" in src, src[-2000:]
    assert "sc_dw_conv_run<float, stitch_k0_dw_geom>(stitch_k0_dw_spec" in src and "sc_igemm_conv" not in src
    assert any("or a direct depthwise kernel where it wins" in n for n in cand.notes), cand.notes
    assert_builds_clean_for_sm90(cand, tmp_path / "contend.cu", include)
    biased = builtin_candidate(Depthwise(c=3, mult=2, bias=True), [torch.randn(2, 3, 34, 40)], host=False)
    assert "sc_conv_run" not in biased.files[CU_FILE] and "sc_dw_conv_run<float, stitch_k0_geom>" in biased.files[CU_FILE]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,kw,shape", [c for c in CASES if not c[1].get("bias")])
def test_on_the_gpu_as_cudnns_contender_it_matches(name, kw, shape, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv(emit_conv.DEPTHWISE_ENV, "contend")
    torch.manual_seed(3)
    module = Depthwise(**kw)
    inputs = [torch.randn(shape[0] * 2, shape[1], shape[2] * 3, shape[3] * 2)]
    cand = builtin_candidate(module, inputs, host=False)
    assert "stitch_k0_dw" in cand.files[CU_FILE] or kw.get("then_relu"), cand.notes
    module = module.cuda()
    new = _model_new(cand, module, kw, tmp_path / "m").cuda()
    args = [t.cuda() for t in inputs]
    with torch.no_grad():
        want = module(*args)
        for _ in range(4):  # the first call chooses; the later ones run the choice
            got = new(*args)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,kw,shape", CASES)
def test_on_the_gpu_each_depthwise_candidate_matches_its_module(name, kw, shape, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(3)
    module = Depthwise(**kw)
    big = (shape[0] * 2, shape[1], shape[2] * 3, shape[3] * 2)  # several tiles and planes per block column
    inputs = [torch.randn(big)]
    cand = builtin_candidate(module, inputs, host=False)
    src = cand.files[CU_FILE]
    assert "sc_dw_conv_run<float, stitch_k0_geom>(stitch_k0_spec" in src or "sc_dw_conv_launch<float, stitch_k0_geom>" in src
    module = module.cuda()
    new = _model_new(cand, module, kw, tmp_path / "m").cuda()
    args = [t.cuda() for t in inputs]
    with torch.no_grad():
        want = module(*args)
        for _ in range(4):
            got = new(*args)
    # fp32 FMAs in another order than cuDNN's / PyTorch's kernel: a few ulps.
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# The chain before a depthwise convolution computed as its input is staged (a prologue, never
# stored): MobileNet's and EfficientNet's inverted residual in eval mode, a 1x1 convolution, then
# batch norm and ReLU6 (pointwise with running statistics), then the depthwise one.


class InvertedResidual(nn.Module):
    """expand=False: the block without its 1x1 convolution (a cuDNN call, which has no CPU entry), so
    that the candidate runs on the CPU through host entries."""

    def __init__(self, cin: int = 4, hidden: int = 12, k: int = 3, stride: int = 1, expand: bool = True):
        super().__init__()
        self.expand = nn.Conv2d(cin, hidden, 1, bias=False) if expand else nn.Identity()
        self.bn = nn.BatchNorm2d(hidden)
        self.dw = nn.Conv2d(hidden, hidden, k, stride=stride, padding=k // 2, groups=hidden, bias=False)
        with torch.no_grad():  # running statistics a trained network would have
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
        self.eval()

    def forward(self, x):
        return self.dw(torch.clamp(self.bn(self.expand(x)), 0.0, 6.0))


class Sandwich(nn.Module):
    """The inverted residual's middle in eval mode: batch norm and ReLU6, the depthwise convolution,
    batch norm and ReLU6 again: one kernel, the chain before computed as staged, the chain after as
    stored. keep=True: forward also returns the convolution's own result (it must be stored)."""

    def __init__(self, c: int = 12, k: int = 5, stride: int = 2, keep: bool = False):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)
        self.dw = nn.Conv2d(c, c, k, stride=stride, padding=k // 2, groups=c, bias=False)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.bias.uniform_(-0.5, 0.5)
        self.keep = keep
        self.eval()

    def forward(self, x):
        y = self.dw(torch.clamp(self.bn1(x), 0.0, 6.0))
        z = torch.clamp(self.bn2(y), 0.0, 6.0)
        return (z, y) if self.keep else z


class ChainThenDepthwise(nn.Module):
    """A chain of the input itself (read at the element) and a per-channel operand."""

    def __init__(self, c: int = 5, share: bool = False):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(c, 1, 1) + 0.5)
        self.dw = nn.Conv2d(c, 2 * c, 5, stride=2, padding=2, groups=c, bias=True)
        self.share = share

    def forward(self, x):
        a = torch.relu(x * self.scale + 1.0)
        y = self.dw(a)
        return (y, a.sum()) if self.share else y


def _dw_group(plan):
    (g,) = [g for g in plan.groups if g.kind == "kernel" and "depthwise" in g.note]
    return g


@pytest.mark.parametrize("make,shape,taken", [
    (lambda: InvertedResidual(), (2, 4, 30, 60), True),
    (lambda: InvertedResidual(k=5, stride=2), (1, 4, 60, 120), True),
    (lambda: ChainThenDepthwise(), (2, 5, 60, 120), True),
    (lambda: ChainThenDepthwise(share=True), (2, 5, 60, 120), False),  # the sum reads the chain too
])
def test_which_chains_the_depthwise_kernel_computes_as_it_stages(make, shape, taken):
    from conftest import plan_of

    plan = plan_of(make(), [torch.randn(shape)])
    assert ("prologue" in _dw_group(plan).note) == taken, _dw_group(plan).note
    if taken:  # no pointwise kernel is left: the chain is computed where the depthwise kernel reads it
        assert not [g for g in plan.groups if g.kind == "pointwise"], [g.note for g in plan.groups]


class TrainingBlock(nn.Module):
    """MobileNet's batch norm (training mode: batch statistics, a norm kernel) and ReLU (or ReLU6)
    before a depthwise convolution."""

    def __init__(self, c: int = 8, k: int = 3, stride: int = 1, six: bool = False, affine: bool = True):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, affine=affine)
        self.dw = nn.Conv2d(c, c, k, stride=stride, padding=k // 2, groups=c, bias=False)
        self.six = six
        if affine:
            with torch.no_grad():
                self.bn.weight.uniform_(0.5, 1.5)
                self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        y = self.bn(x)
        return self.dw(torch.clamp(y, 0.0, 6.0) if self.six else torch.relu(y))


@pytest.mark.parametrize("value", [None, "0"])
def test_a_training_norm_before_it_keeps_its_statistics_and_the_kernel_normalises(value, monkeypatch):
    """By default the norm computes its statistics alone and the depthwise kernel normalises and
    activates as it stages its input (train_bn_prologue); "0": the norm stores its normalised,
    activated result (the ReLU as its epilogue) and the depthwise kernel reads it."""
    from conftest import plan_of

    from stitchcuda.agents.plan import planner

    if value is not None:
        monkeypatch.setenv(planner.TRAIN_BN_PROLOGUE_ENV, value)
    plan = plan_of(TrainingBlock(), [torch.randn(2, 8, 64, 128)])
    (norm,) = [g for g in plan.groups if g.kind == "kernel" and "batch_norm" in g.note]
    dw = _dw_group(plan).note
    if value is None:
        assert "statistics only" in norm.note and "epilogue" not in norm.note, norm.note
        assert "prologue sub -> mul -> mul -> add -> relu" in dw and "staged" in dw, dw
    else:
        assert "epilogue relu" in norm.note and "statistics only" not in norm.note, norm.note
        assert "prologue" not in dw, dw
    # (the one pointwise kernel left adds to the norm's step counter, over [])
    assert not [g for g in plan.groups if g.kind == "pointwise" and "over []" not in g.note], [g.note for g in plan.groups]


def test_where_the_depthwise_kernel_does_not_take_the_chain_the_norm_stores_it():
    """A plane too small for our depthwise kernel stays with cuDNN, which takes no prologue: the
    chain would be a pass of its own, so the norm is planned again whole, with its epilogue."""
    from conftest import plan_of

    plan = plan_of(TrainingBlock(c=16), [torch.randn(4, 16, 4, 4)])
    (norm,) = [g for g in plan.groups if g.kind == "kernel" and "batch_norm" in g.note]
    assert "statistics only" not in norm.note and "epilogue relu" in norm.note, norm.note
    assert not [g for g in plan.groups if g.kind == "pointwise" and "over []" not in g.note], [g.note for g in plan.groups]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("kw,shape", [
    (dict(), (2, 8, 30, 60)),
    (dict(k=5, stride=2, six=True), (2, 12, 64, 128)),
    (dict(affine=False), (2, 4, 33, 40)),
])
def test_a_training_norm_normalised_by_the_depthwise_kernel_matches_on_the_cpu(kw, shape, tmp_path):
    """Through the host entries: the output, the running statistics the norm updates, and the
    gradients, which backward takes from the reference math (save_mean and save_invstd carry none in
    PyTorch; the plan's reference computes them from the input: train_bn_prologue)."""
    import copy

    from conftest import load_model_new

    torch.manual_seed(6)
    module = TrainingBlock(c=shape[1], **kw)
    before = copy.deepcopy(module)
    x = torch.randn(shape) * 2 + 0.5
    cand = builtin_candidate(module, [x], host=True)
    assert "statistics only" in " ".join(cand.notes) or "statistics only" in cand.files[CU_FILE]
    new, _ = load_model_new(cand, before, tmp_path)
    new.train()
    fresh = torch.randn(shape) * 2 + 0.5
    with torch.no_grad():
        got = new(fresh)
    want = copy.deepcopy(before)(fresh)
    torch.testing.assert_close(got, want.detach(), rtol=1e-4, atol=1e-4)
    reference = copy.deepcopy(before)
    with torch.no_grad():
        reference(fresh)
    torch.testing.assert_close(new.bn.running_mean if hasattr(new, "bn") else new.state_dict()["bn.running_mean"],
                               reference.bn.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(new.state_dict()["bn.running_var"], reference.bn.running_var, rtol=1e-5, atol=1e-6)
    # Gradients through the custom op's backward against the module's own.
    xa, xb = fresh.clone().requires_grad_(), fresh.clone().requires_grad_()
    grad = torch.randn_like(want)
    new(xa).backward(grad)
    module_b = copy.deepcopy(before)
    module_b(xb).backward(grad)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kw,shape", [(dict(), (4, 16, 60, 100)), (dict(k=5, stride=2, six=True), (3, 24, 90, 140))])
def test_on_the_gpu_a_training_norm_normalised_by_the_depthwise_kernel_matches(kw, shape, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(7)
    module = TrainingBlock(c=shape[1], **kw)
    cand = builtin_candidate(module, [torch.randn(shape)], host=False)
    assert "statistics only" in cand.files[CU_FILE] and "sc_dw_staged<" in cand.files[CU_FILE]
    got, want = _on_the_gpu(cand, module, shape, tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("value,taken", [("0", False), ("1", True), (None, True)])
def test_the_switch(value, taken, monkeypatch):
    """Off ("0") the chain is stored first, its own pointwise kernel; on ("1") and by default (measured
    faster on the H200: see planner.CONV_PROLOGUES_ENV) the depthwise kernel takes it as its prologue."""
    from conftest import plan_of

    from stitchcuda.agents.plan import planner

    if value is not None:
        monkeypatch.setenv(planner.CONV_PROLOGUES_ENV, value)
    plan = plan_of(InvertedResidual(), [torch.randn(2, 4, 30, 60)])
    assert ("prologue" in _dw_group(plan).note) == taken, _dw_group(plan).note
    # The expansion's chain (batch norm, ReLU6) is the pointwise group that goes when taken.
    pointwise = [g for g in plan.groups if g.kind == "pointwise"]
    assert bool(pointwise) != taken, [g.note for g in plan.groups]


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("make,shape", [
    (lambda: InvertedResidual(cin=12, expand=False), (2, 12, 30, 60)),
    (lambda: InvertedResidual(cin=12, k=5, stride=2, expand=False), (1, 12, 64, 128)),
    (lambda: ChainThenDepthwise(), (2, 5, 40, 60)),
])
@pytest.mark.parametrize("staged", ["1", "0"])
def test_a_chain_computed_as_staged_matches_the_module_on_the_cpu(make, shape, dtype, staged, tmp_path, monkeypatch):
    """Through the candidate's host entries: the depthwise kernel's host entry stages each element
    through the prologue's loader (zeros outside the image stay zeros, not the chain of zero); in fp32
    by default the chain as a function of the one tensor it reads at the element (the staged form)."""
    from conftest import load_model_new

    monkeypatch.setenv(emit_conv.DW_STAGED_ENV, staged)
    torch.manual_seed(4)
    module = make().to(dtype)
    x = torch.randn(shape).to(dtype)
    cand = builtin_candidate(module, [x], host=True)
    assert "sc_dw_conv_host_rd<" in cand.files[CU_FILE] and "prologue" in cand.files[CU_FILE]
    assert ("rd = sc_dw_staged<" in cand.files[CU_FILE]) == (staged == "1" and dtype == torch.float32)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        fresh = torch.randn(shape).to(dtype)
        got, want = new(fresh), module.float()(fresh.float())
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("staged", ["1", "0"])
def test_a_depthwise_kernel_with_a_prologue_builds_for_sm90(staged, tmp_path, monkeypatch):
    # Without the 1x1 convolution: a cuDNN call would need cuDNN's headers, which CI has not.
    monkeypatch.setenv(emit_conv.DW_STAGED_ENV, staged)
    cand = builtin_candidate(InvertedResidual(cin=12, k=5, stride=2, expand=False), [torch.randn(1, 12, 64, 128)],
                             host=False)
    assert "prologue" in cand.files[CU_FILE]
    assert ("rd = sc_dw_staged<" in cand.files[CU_FILE]) == (staged == "1")
    src = tmp_path / "k.cu"
    src.write_text(cand.files[CU_FILE])
    result = runtime.build([src], arch="sm_90")
    warnings = [line for line in result.log.lower().splitlines() if "warning #" in line and '"sc_grid"' not in line]
    assert result.library.exists() and not warnings, result.log


def _on_the_gpu(cand, module: nn.Module, shape, folder) -> tuple[torch.Tensor, torch.Tensor]:
    """(the candidate's output, the module's) on the GPU on one fresh input. No TF32 on the module's
    side: a dense convolution before the depthwise one would otherwise differ from the candidate's
    fp32 one by TF32's rounding."""
    from conftest import outputs_on_the_gpu

    with torch.backends.cudnn.flags(allow_tf32=False):
        return outputs_on_the_gpu(cand, module, [torch.randn(shape)], folder)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("make,shape", [
    (lambda: InvertedResidual(), (4, 4, 60, 100)),
    (lambda: InvertedResidual(hidden=24, k=5, stride=2), (3, 4, 90, 140)),
    (lambda: ChainThenDepthwise(), (4, 5, 63, 120)),
])
@pytest.mark.parametrize("staged", ["1", "0"])
def test_on_the_gpu_a_chain_computed_as_staged_matches(make, shape, staged, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    monkeypatch.setenv(emit_conv.DW_STAGED_ENV, staged)
    torch.manual_seed(5)
    module = make()
    x = torch.randn(shape)
    # The expanding 1x1 convolution in fp32 (PRECISE_SPLIT): at TF32 it alone misses 1e-4 (seen
    # 2026-11-29 on the H200: 6.5e-4 at 4 input channels), which says nothing of the prologue.
    cand = builtin_candidate(module, [x], host=False, precise=kernels.PRECISE_SPLIT)
    assert "sc_dw_conv_launch<" in cand.files[CU_FILE]
    assert ("rd = sc_dw_staged<" in cand.files[CU_FILE]) == (staged == "1")
    got, want = _on_the_gpu(cand, module, shape, tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("keep", [False, True])
def test_the_chain_after_is_computed_as_stored_unless_the_result_is_read(keep):
    from conftest import plan_of

    plan = plan_of(Sandwich(keep=keep), [torch.randn(1, 12, 64, 128)])
    note = _dw_group(plan).note
    assert "prologue" in note and ("epilogue" in note) != keep, note
    assert bool([g for g in plan.groups if g.kind == "pointwise"]) == keep


def test_the_epilogue_switch(monkeypatch):
    from conftest import plan_of

    from stitchcuda.agents.plan import planner

    monkeypatch.setenv(planner.NCHW_CONV_EPILOGUE_ENV, "0")
    note = _dw_group(plan_of(Sandwich(), [torch.randn(1, 12, 64, 128)])).note
    assert "prologue" in note and "epilogue" not in note


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("kw,shape", [(dict(), (1, 12, 64, 128)), (dict(k=3, stride=1), (2, 12, 40, 70)),
                                      (dict(keep=True), (1, 12, 64, 128))])
def test_a_sandwich_in_one_kernel_matches_the_module_on_the_cpu(kw, shape, dtype, tmp_path):
    from conftest import load_model_new

    torch.manual_seed(6)
    module = Sandwich(**kw).to(dtype)
    x = torch.randn(shape).to(dtype)
    cand = builtin_candidate(module, [x], host=True)
    assert "sc_dw_conv_host_rd<" in cand.files[CU_FILE]
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        fresh = torch.randn(shape).to(dtype)
        got, want = new(fresh), module.float()(fresh.float())
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        torch.testing.assert_close(g.float(), w, rtol=tol, atol=tol)


class DepthwiseThenMixed(nn.Module):
    """An epilogue reading operands constant over a plane (a per-channel scale, a per-sample gate)
    and operands that are not (the residual, a per-column bias): the first worked out once a plane
    (at_plane), the others at each element."""

    def __init__(self, c: int = 6):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.scale = nn.Parameter(torch.rand(c, 1, 1) + 0.5)

    def forward(self, x, residual, gate, columns):
        return torch.relu(self.dw(x) * self.scale * gate + residual + columns)


def _mixed_inputs(shape):
    n, c, h, w = shape
    return [torch.randn(shape), torch.randn(shape), torch.rand(n, 1, 1, 1), torch.randn(w)]


def test_an_epilogue_works_out_what_a_plane_shares_once():
    torch.manual_seed(8)
    module = DepthwiseThenMixed()
    cand = builtin_candidate(module, _mixed_inputs((2, 6, 40, 40)), host=False)
    src = cand.files[CU_FILE]
    start = src.index("SC_INLINE plane_t at_plane(uint32_t p) const {")
    at_plane = src[start:src.index("}", start)]
    per_element = src[src.index("SC_INLINE float operator()(const plane_t& h_"):]
    per_element = per_element[:per_element.index("\n  }")]
    # The channel (p % 6) and the sample (p / 6) from the plane's number; the residual (at e) and the
    # columns (e % 40) at each element.
    assert "(uint32_t)p % 6u" in at_plane and "(uint32_t)p / 6u" in at_plane and "[e]" not in at_plane, at_plane
    assert "[e]" in per_element and "% 40u" in per_element and "(uint32_t)p" not in per_element, per_element
    assert any("epilogue" in n for n in cand.notes if "depthwise" in n), cand.notes


def test_a_plane_index_is_written_from_the_plane_only_where_it_is_constant_over_it():
    from stitchcuda.agents.coder.codegen import _plane_index_expr

    shape, plane = (2, 6, 40, 40), 1600
    assert _plane_index_expr(shape, (0, 1, 0, 0), 0, plane) == "(int64_t)((uint32_t)p % 6u)"  # channel
    assert _plane_index_expr(shape, (1, 0, 0, 0), 0, plane) == "(int64_t)((uint32_t)p / 6u)"  # sample
    assert _plane_index_expr(shape, (6, 1, 0, 0), 3, plane) == "3 + (int64_t)((uint32_t)p / 6u) * 6 + (int64_t)((uint32_t)p % 6u)"
    assert _plane_index_expr(shape, (0, 0, 0, 1), 0, plane) is None  # a column: varies within a plane
    assert _plane_index_expr(shape, (0, 1, 0, 0), 0, 800) == "(int64_t)((uint32_t)p / 2u % 6u)"  # half planes
    assert _plane_index_expr(shape, (0, 1, 0, 0), 0, 3200) is None  # two channels a plane
    # Planes numbering 2^32 or more would not fit p's 32 bits.
    assert _plane_index_expr((2**29, 4, 2, 2), (0, 1, 0, 0), 0, 4) == "(int64_t)((uint32_t)p % 4u)"
    assert _plane_index_expr((2**30, 4, 2, 2), (0, 1, 0, 0), 0, 4) is None


@pytest.mark.nvcc
@needs_nvcc
def test_an_epilogue_with_plane_and_element_operands_matches_the_module_on_the_cpu(tmp_path):
    from conftest import load_model_new

    torch.manual_seed(9)
    module = DepthwiseThenMixed()
    shape = (2, 6, 40, 40)
    cand = builtin_candidate(module, _mixed_inputs(shape), host=True)
    new, _ = load_model_new(cand, module, tmp_path)
    with torch.no_grad():
        fresh = _mixed_inputs(shape)
        torch.testing.assert_close(new(*fresh), module(*fresh), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_an_epilogue_with_plane_and_element_operands_matches(tmp_path, monkeypatch):
    from conftest import outputs_on_the_gpu

    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(10)
    module = DepthwiseThenMixed(c=24)
    shape = (3, 24, 56, 56)
    cand = builtin_candidate(module, _mixed_inputs(shape), host=False)  # traced on the CPU
    got, want = outputs_on_the_gpu(cand, module, _mixed_inputs(shape), tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kw,shape", [(dict(), (4, 24, 90, 140)), (dict(k=3, stride=1), (3, 24, 70, 130))])
def test_on_the_gpu_a_sandwich_in_one_kernel_matches(kw, shape, tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_ARCH", raising=False)
    torch.manual_seed(7)
    module = Sandwich(c=24, **kw)
    cand = builtin_candidate(module, [torch.randn(shape)], host=False)
    assert "sc_dw_conv_launch<" in cand.files[CU_FILE] and "epilogue" in cand.files[CU_FILE]
    got, want = _on_the_gpu(cand, module, shape, tmp_path)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
