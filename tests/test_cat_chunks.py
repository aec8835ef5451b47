"""A cat or stack read and written 16 bytes a thread (emit_layout._cat_chunks): where the elements after the
cat's dim number a multiple of the vector, each chunk lies in one source, consecutive there. Checked
through the candidates' host entries, which take the same branch the launcher takes: chunks where
every pointer is aligned, element by element where one is not (a source one element into its
storage), against PyTorch; and which cats it leaves element by element at emit time."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import builtin_candidate, load_model_new, needs_nvcc

pytestmark = pytest.mark.usefixtures("isolated_cache")
CU = "fused_kernels.cu"


class Plain(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x, y):
        return torch.cat([x, y], dim=self.dim)


class Stacked(nn.Module):
    """A stack: a cat of slabs one deep along the new dim, one of them computed as read."""

    def forward(self, x, y):
        return torch.stack([x * 2.0 + 1.0, y], dim=1)


class Computed(nn.Module):
    """Two sources computed as read (their loaders' vec), one stored input between them."""

    def forward(self, x, y, z):
        return torch.cat([torch.relu(x + 1.0), z, torch.tanh(y) * 2.0], dim=1)


class Halves(nn.Module):
    """A cat of a chunk's halves (channel slices of one tensor, each batch's slab a stride of the
    whole apart), one computed as read: YOLO's C2f and CSP blocks."""

    def forward(self, x):
        a, b = x.chunk(2, 1)
        return torch.cat([b, a, b * 2.0], dim=1)


class StackedViews(nn.Module):
    """Stacks of views that are not row-major (a split's thirds, a transpose): element by element;
    and of whole rows at an offset: 16 bytes a thread."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        if self.kind == "split":
            q, k, v = torch.relu(x).split(8, -1)
            return torch.stack([q, k, v], 0)
        if self.kind == "transposed":
            return torch.stack([x.t(), (x * 2.0).t()], 0)
        return torch.stack([x[0], x[2]], 0)


class Sliced(nn.Module):
    """Slices whose dims before the cat's step as one (rows 2..5 of every [8, 4] plane), or do not
    (channels 1..2 of 4, a cat along the rows: each channel's slab apart from the next)."""

    def __init__(self, merged: bool):
        super().__init__()
        self.merged = merged

    def forward(self, x):
        if self.merged:
            return torch.cat([x[:, :, 2:6], x[:, :, :4]], dim=2)
        return torch.cat([x[:, 1:3], x[:, :2]], dim=2)


def _chunked(source: str) -> bool:
    return "_v_kernel<<<" in source and "_chunk(q," in source


# (module, input shapes, dtype, chunked): inner sizes 20 (fp32: 4 a chunk), 8 (fp16: 8), 6 (int64:
# 2); slices of one tensor whose slabs are a stride apart; a cat along the last dim (a channels-last
# cat along C) whose sources' sizes the vector divides. 5 elements after the dim (no vector divides
# them), slices whose dims before the cat's do not step as one, and a last-dim cat of 6 and 10
# stay per element.
CASES = [
    ("channels fp32", lambda: Plain(1), [(2, 3, 4, 5), (2, 5, 4, 5)], torch.float32, True),
    ("channels fp16", lambda: Plain(1), [(3, 2, 8), (3, 6, 8)], torch.float16, True),
    ("rows int64", lambda: Plain(0), [(2, 6), (5, 6)], torch.int64, True),
    ("computed sources", Computed, [(2, 3, 4, 4), (2, 2, 4, 4), (2, 1, 4, 4)], torch.float32, True),
    ("stack", Stacked, [(3, 4, 6), (3, 4, 6)], torch.float32, True),
    ("chunk halves", Halves, [(2, 8, 4, 4)], torch.float32, True),
    ("slices stepping as one", lambda: Sliced(True), [(2, 3, 8, 4)], torch.float32, True),
    ("stacked rows", lambda: StackedViews("rows"), [(4, 8)], torch.float32, True),
    ("odd inner", lambda: Plain(1), [(2, 3, 5), (2, 4, 5)], torch.float32, False),
    ("stacked split", lambda: StackedViews("split"), [(2, 5, 24)], torch.float32, False),
    ("stacked transposes", lambda: StackedViews("transposed"), [(8, 8)], torch.float32, False),
    ("slices stepping apart", lambda: Sliced(False), [(2, 4, 6, 4)], torch.float32, False),
    ("last dim", lambda: Plain(-1), [(4, 8), (4, 12)], torch.float32, True),
    ("last dim fp16", lambda: Plain(-1), [(3, 16), (3, 8)], torch.float16, True),
    ("last dim odd", lambda: Plain(-1), [(4, 6), (4, 10)], torch.float32, False),
]


def _make(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.int64:
        return torch.randint(-1000, 1000, shape, generator=g)
    return torch.randn(shape, generator=g).to(dtype)


@needs_nvcc
@pytest.mark.parametrize("name,make,shapes,dtype,chunked", CASES, ids=[c[0] for c in CASES])
def test_cats_match_pytorch_chunked_or_not(tmp_path, name, make, shapes, dtype, chunked):
    module = make()
    args = [_make(s, dtype, k) for k, s in enumerate(shapes)]
    cand = builtin_candidate(module, args)
    assert _chunked(cand.files[CU]) == chunked, cand.files[CU][-2500:]
    new, _ = load_model_new(cand, module, tmp_path)
    # Copies are exact; a source computed as read is our tanh, within an ulp of PyTorch's.
    tol = 1e-6 if isinstance(module, Computed) else 0.0
    with torch.no_grad():
        fresh = [_make(s, dtype, 10 + k) for k, s in enumerate(shapes)]
        torch.testing.assert_close(new(*fresh), module(*fresh), rtol=tol, atol=tol)
        if chunked:
            # A source one element into its storage: contiguous, so forward passes it as it is, but
            # not 16-byte aligned, so the launcher (and the host entry) copy element by element.
            first = torch.cat([_make((1,), dtype, 30), _make(shapes[0], dtype, 31).reshape(-1)])[1:]
            shifted = [first.view(shapes[0]), *fresh[1:]]
            assert shifted[0].is_contiguous() and shifted[0].data_ptr() % 16
            torch.testing.assert_close(new(*shifted), module(*shifted), rtol=tol, atol=tol)


def test_the_switch_leaves_every_cat_element_by_element(monkeypatch):
    from stitchcuda.agents.coder import emit_layout

    args = [torch.randn(2, 3, 4, 5), torch.randn(2, 5, 4, 5)]
    assert _chunked(builtin_candidate(Plain(1), args, host=False).files[CU])
    monkeypatch.setenv(emit_layout.CAT_CHUNKS_ENV, "0")
    assert not _chunked(builtin_candidate(Plain(1), args, host=False).files[CU])


@needs_nvcc
def test_chunked_cats_build_for_sm90_without_warnings(tmp_path):
    from stitchcuda import runtime

    for k, (_, make, shapes, dtype, _) in enumerate(CASES[:8]):
        cand = builtin_candidate(make(), [_make(s, dtype, 0) for s in shapes], host=False)
        src = tmp_path / f"k{k}.cu"
        src.write_text(cand.files[CU])
        result = runtime.build([src], arch="sm_90")
        assert result.library.exists() and "warning" not in result.log.lower(), result.log


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,make,shapes,dtype,chunked", CASES[:8], ids=[c[0] for c in CASES[:8]])
def test_on_the_gpu_chunked_cats_match_pytorch(tmp_path, name, make, shapes, dtype, chunked):
    module = make().cuda()
    cand = builtin_candidate(make(), [_make(s, dtype, 0) for s in shapes], host=False)
    new, _ = load_model_new(cand, module, tmp_path)
    new = new.cuda()
    with torch.no_grad():
        fresh = [_make(s, dtype, 20 + k).cuda() for k, s in enumerate(shapes)]
        torch.testing.assert_close(new(*fresh), module(*fresh), rtol=1e-6, atol=1e-6)
