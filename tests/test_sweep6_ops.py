"""Ops the sixth coverage sweep (bench/coverage, 2026-12-04) found unplanned, each planned now and
run through the candidate's CPU entry points against PyTorch: a float tensor's floor division
(DETR's sine position embedding, `dim_t // 2`), torch.diag_embed (3D Gaussian splatting's
scale matrices), its offsets and dims included, and boolean-mask reads written back or reduced
(PointNet++'s `distance[mask] = dist[mask]`, C51's `l[mask] -= 1`, a loss over valid elements;
agents/masked_reads.py); other uses of such a read keep the trace's error."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc, planned_on_the_cpu


class SinePositions(nn.Module):
    """DETR's PositionEmbeddingSine on a mask-free feature map, the `//` on a float arange, and a
    floor division of two tensors whose signs differ (Python's floor, not C's truncation)."""

    def forward(self, x, y):
        b, c, h, w = x.shape
        dim_t = torch.arange(c // 2, dtype=torch.float32, device=x.device)
        dim_t = 10000 ** (2 * (dim_t // 2) / (c // 2))
        pos_y = torch.arange(1, h + 1, dtype=torch.float32, device=x.device)[:, None] / h * 6.283185307179586
        pos_x = torch.arange(1, w + 1, dtype=torch.float32, device=x.device)[None, :] / w * 6.283185307179586
        py = pos_y[:, :, None] / dim_t
        px = pos_x[:, :, None] / dim_t
        py = torch.stack((py[:, :, 0::2].sin(), py[:, :, 1::2].cos()), dim=3).flatten(2)
        px = torch.stack((px[:, :, 0::2].sin(), px[:, :, 1::2].cos()), dim=3).flatten(2)
        pos = torch.cat((py.expand(h, w, -1), px.expand(h, w, -1)), dim=2).permute(2, 0, 1)
        return x + pos, torch.floor_divide(x, y), x // -0.75


class DiagEmbeds(nn.Module):
    """Scale matrices from per-Gaussian scales, an offset diagonal, and one into dims (0, 2)."""

    def forward(self, s, v):
        scales = torch.diag_embed(torch.exp(s))  # [N, 3, 3]
        return scales * 2, torch.diag_embed(v, offset=1), torch.diag_embed(v, offset=-2, dim1=0, dim2=2)


class MaskedReadsWrittenOrReduced(nn.Module):
    def forward(self, xyz, b):
        distance = torch.ones(xyz.shape[:2], device=xyz.device) * 1e10
        for i in range(3):  # farthest point sampling's running minimum
            dist = ((xyz - xyz[:, i:i + 1]) ** 2).sum(-1)
            mask = dist < distance
            distance[mask] = dist[mask]
        lo = b.floor().long()
        lo[(lo > 0) & (b > 1.5)] -= 1
        loss = (b - 2).abs()
        valid = b > 1
        rows = xyz[:, :, 0] > 0  # a mask over the leading dims of a [B, N, 3] tensor
        moved = xyz.clone()
        moved[rows] = xyz[rows] * 0.5 + 1
        return distance, lo, loss[valid].mean(), (loss[valid] ** 2).sum(), moved


def test_other_uses_of_a_masked_read_keep_the_traces_error():
    from stitchcuda.agents import graph

    class Counted(nn.Module):
        def forward(self, x):
            return x[x > 0].view(-1, 1) * 2  # its shape is the count's

    with pytest.raises(graph.TraceError, match="nonzero"):
        graph.trace_module(Counted(), [torch.randn(4, 5)])


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("module,inputs", [
    (SinePositions(), lambda g: [torch.randn(2, 16, 5, 6, generator=g), torch.randn(2, 16, 5, 6, generator=g) + 0.1]),
    (DiagEmbeds(), lambda g: [torch.randn(7, 3, generator=g), torch.randn(4, 5, generator=g)]),
    (MaskedReadsWrittenOrReduced(), lambda g: [torch.randn(2, 16, 3, generator=g), torch.rand(2, 16, generator=g) * 4]),
], ids=["floor_divide", "diag_embed", "masked_reads"])
def test_they_match_pytorch_on_the_cpu(tmp_path, module, inputs):
    plan, new = planned_on_the_cpu(module, inputs(torch.Generator().manual_seed(0)), tmp_path)
    with torch.no_grad():
        for seed in (1, 2):
            given = inputs(torch.Generator().manual_seed(seed))
            for k, (g, w) in enumerate(zip(new(*given), module(*given), strict=True)):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"result {k}: {m}")
