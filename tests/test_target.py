"""The Target: built from a device's properties (fake ones here: no GPU), from the spec table by name,
from Nsight Compute's device attributes; and what depends on it: emitters size their grids by its SM
count, and the roofline judges kernels against its peaks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import Fn
from torch._subclasses.fake_tensor import FakeTensorMode

from stitchcuda import target as target_mod
from stitchcuda.agents import graph
from stitchcuda.agents.coder import emit_loss, emit_norm, emit_reduce, kernels
from stitchcuda.agents.llm import prompts
from stitchcuda.profiling import ncu, roofline
from stitchcuda.target import Target

REC = Path(__file__).parent / "fixtures" / "recorded" / "h100-profiles"


def props(name: str, cc: tuple[int, int], sms: int, *, mem_khz: int | None, bus: int | None, **more: int):
    """What torch.cuda.get_device_properties gives (the fields Target reads), for a GPU not here."""
    return SimpleNamespace(name=name, major=cc[0], minor=cc[1], multi_processor_count=sms,
                           memory_clock_rate=mem_khz, memory_bus_width=bus, **more)


# Memory clocks and bus widths as the CUDA attributes report them on these parts.
# The H200's as the lent one reported them through torch (2026-11-25).
H200 = props("NVIDIA H200", (9, 0), 132, mem_khz=3_201_000, bus=6016, L2_cache_size=62_914_560,
             shared_memory_per_block_optin=232_448, shared_memory_per_multiprocessor=233_472,
             max_threads_per_multi_processor=2048)
A100 = props("NVIDIA A100-SXM4-80GB", (8, 0), 108, mem_khz=1_593_000, bus=5120, L2_cache_size=41_943_040,
             max_threads_per_multi_processor=2048)
RTX4090 = props("NVIDIA GeForce RTX 4090", (8, 9), 128, mem_khz=10_501_000, bus=384,
                max_threads_per_multi_processor=1536, shared_memory_per_block_optin=101_376)


def test_h200_from_its_properties():
    t = Target.from_properties(H200, source="fake device")
    assert (t.name, t.arch, t.sm_count, t.spec) == ("NVIDIA H200", "sm_90", 132, "H200 SXM")
    assert t.dram_bytes_per_s == pytest.approx(4.814e12, rel=1e-3)  # 3201 MHz x 6016 bits, double data rate
    assert t.roofline_dram_bytes_per_s == 4.22e12  # what a copy reached on the lent H200
    assert (t.fp32_flops, t.tf32_flops, t.bf16_flops) == (67e12, 494e12, 989e12)
    assert (t.shared_per_block_optin, t.l2_bytes, t.max_threads_per_sm) == (232_448, 62_914_560, 2048)
    assert t.notes == () and "H200 Tensor Core GPU datasheet" in t.source


def test_a100_and_an_rtx_card():
    a = Target.from_properties(A100)
    assert (a.arch, a.sm_count, a.spec, a.tf32_flops) == ("sm_80", 108, "A100 80GB SXM", 156e12)
    assert a.dram_bytes_per_s == pytest.approx(2.039e12, rel=0.01)
    # Not reported by these fake properties: the compute capability's limits fill in.
    assert (a.shared_per_block_optin, a.shared_per_sm) == (163 * 1024, 164 * 1024)
    r = Target.from_properties(RTX4090)
    assert (r.arch, r.sm_count, r.spec, r.max_threads_per_sm) == ("sm_89", 128, "GeForce RTX 4090", 1536)
    assert r.dram_bytes_per_s == pytest.approx(1008e9, rel=0.01)
    assert (r.fp32_flops, r.tf32_flops, r.fp16_flops) == (82.6e12, 82.6e12, 165.2e12)
    assert r.shared_per_block_optin == 101_376


def test_device_names_pick_the_most_specific_row():
    nvl = Target.from_properties(props("NVIDIA H100 NVL", (9, 0), 132, mem_khz=None, bus=None))
    assert (nvl.spec, nvl.fp32_flops, nvl.dram_bytes_per_s) == ("H100 NVL", 60e12, 3.9e12)  # table: none reported
    pcie = Target.from_properties(props("NVIDIA A100-PCIE-40GB", (8, 0), 108, mem_khz=1_215_000, bus=5120))
    assert pcie.spec == "A100 40GB" and pcie.dram_bytes_per_s == pytest.approx(1.555e12, rel=0.01)
    l4 = Target.from_properties(props("NVIDIA L4", (8, 9), 58, mem_khz=6_251_000, bus=192))
    assert l4.spec == "L4" and l4.dram_bytes_per_s == pytest.approx(300e9, rel=0.01)


def test_missing_properties_are_asked_of_the_driver():
    """torch builds without memory_clock_rate: the driver attribute answers (cuDeviceGetAttribute)."""
    asked: list[int] = []

    def attribute(attr: int) -> int | None:
        asked.append(attr)
        return {36: 3_201_000, 37: 6016}.get(attr)

    bare = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132)
    t = Target.from_properties(bare, attribute=attribute)
    assert {36, 37} <= set(asked) and t.dram_bytes_per_s == pytest.approx(4.814e12, rel=1e-3)


def test_unknown_device_is_estimated_and_says_so():
    t = Target.from_properties(props("NVIDIA B200", (10, 0), 148, mem_khz=None, bus=None))
    assert t.spec == "" and t.arch == "sm_100"
    (note, *_) = t.notes
    assert "unknown device 'NVIDIA B200'" in note and "H100 SXM row" in note and "148/132" in note
    assert t.fp32_flops == pytest.approx(67e12 * 148 / 132)
    assert any("DRAM bandwidth not reported" in n for n in t.notes)
    # A clock that implies a bandwidth far from the row's datasheet figure is not believed.
    odd = Target.from_properties(props("NVIDIA H100 PCIe", (9, 0), 114, mem_khz=100_000, bus=5120))
    assert odd.dram_bytes_per_s == 2.0e12 and "datasheet's is used" in odd.notes[0]


def test_named_default_and_env(monkeypatch):
    assert Target.named("H200").spec == Target.named("h200-sxm").spec == "H200 SXM"
    with pytest.raises(ValueError, match="known: h100-sxm"):
        Target.named("gtx480")
    monkeypatch.setenv(target_mod.ENV, "rtx4090")
    t = Target.current()
    assert (t.spec, t.sm_count, t.max_threads_per_sm) == ("GeForce RTX 4090", 128, 1536)
    assert t.source.startswith("named target 'rtx4090'")
    monkeypatch.setenv(target_mod.ENV, "gtx480")
    bad = Target.current()
    assert bad.source.startswith("default: STITCHCUDA_TARGET='gtx480' is not a known GPU") and "gtx480" in bad.notes[0]
    monkeypatch.delenv(target_mod.ENV)
    monkeypatch.setattr(target_mod, "_cuda_available", lambda: False)
    d = Target.current()
    assert d.source.startswith("default: no CUDA GPU seen") and d.name.startswith("default target")
    assert Target.from_dict(d.to_dict()) == d


def test_prompt_names_the_target():
    line = prompts.gpu_line(Target.named("l4"))
    assert "L4, sm_89" in line and "58 SMs" in line and "0.30 TB/s" in line
    assert "named target 'l4'" in line and "H100" not in line


# ---------------------------------------------------------------------------------------------
# Emitters: grids sized by the target


def _ctx(fn, shapes, op: str, target: Target, inputs: int = 1) -> kernels.EmitContext:
    mode = FakeTensorMode()
    with mode:
        xs = [torch.empty(s) for s in shapes]
    g = graph.trace_module(Fn(fn), xs[:inputs], fake_mode=mode)
    return kernels.context(g, next(n["name"] for n in g if n["op"] == op), "k0", target=target)


H100, RTX, L4 = Target.named("h100"), Target.named("rtx4090"), Target.named("l4")


def test_reduction_splits_follow_the_sm_count():
    """A mean of one huge row: split into chunks that fill every SM twice over (2 x SMs x resident
    512-thread groups): 2 x 132 x 4 on an H100, 2 x 128 x 3 on an RTX 4090."""
    notes = {}
    for t in (H100, RTX):
        k = emit_reduce.EMITTERS["mean"](_ctx(lambda x: x.mean(), [(32768, 32768)], "mean", t))
        notes[t.spec] = k.ops[0]
    assert notes["H100 SXM"].endswith(", 1056 splits") and notes["GeForce RTX 4090"].endswith(", 768 splits")
    cols = {t.spec: emit_reduce.EMITTERS["sum"](_ctx(lambda x: x.sum(dim=0), [(65536, 64)], "sum", t)).ops[0]
            for t in (H100, L4)}
    assert cols["H100 SXM"] != cols["L4"]  # resident threads: 132 x 2048 against 58 x 1536


def test_norm_chunks_follow_the_sm_count():
    ln = torch.ops.aten.native_layer_norm.default
    fn = lambda x: ln(x, [1 << 18], None, None, 1e-5)  # noqa: E731 - a one-op module
    got = {t.spec: emit_norm.EMITTERS["native_layer_norm"](_ctx(fn, [(4, 1 << 18)], "native_layer_norm", t))
           for t in (H100, L4)}
    # Chunks shrink until 4 rows x chunks reach 8 blocks per SM: 1056 on the H100, 464 on the L4.
    assert "split, 256 chunks/row" in got["H100 SXM"].ops[0] and "split, 128 chunks/row" in got["L4"].ops[0]
    assert got["H100 SXM"].scratch != got["L4"].scratch


def test_loss_partials_follow_the_resident_blocks():
    fn = lambda a, b: F.mse_loss(a, b)  # noqa: E731
    got = {t.spec: emit_loss.EMITTERS["mse_loss"](_ctx(fn, [(4096, 4096)] * 2, "mse_loss", t, inputs=2))
           for t in (H100, RTX)}
    # One partial per resident 256-thread block: 132 x 8 on the H100, 128 x 6 on the RTX 4090.
    assert "sc_loss_partial<<<1056, 256" in got["H100 SXM"].source and got["H100 SXM"].scratch == [("float64", 2112)]
    assert "sc_loss_partial<<<768, 256" in got["GeForce RTX 4090"].source


def test_context_defaults_to_the_current_target(monkeypatch):
    monkeypatch.setenv(target_mod.ENV, "a100")
    ctx = _ctx(lambda x: x.mean(), [(8, 8)], "mean", None)  # type: ignore[arg-type]
    assert ctx.target.spec == "A100 80GB SXM"


# ---------------------------------------------------------------------------------------------
# The roofline: the profiled device's peaks


def _recorded(name: str) -> str:
    return (REC / name / "ncu.csv").read_text()


def test_recorded_page_names_its_device():
    t = ncu.device_target(_recorded("pointwise"))
    assert t is not None and (t.name, t.spec, t.sm_count, t.arch) == ("NVIDIA H100 80GB HBM3", "H100 SXM", 132, "sm_90")
    assert t.dram_bytes_per_s == pytest.approx(3.35e12, rel=0.01) and t.measured_dram_bytes_per_s == 2.964e12
    assert ncu.device_target("") is None and ncu.device_target("==PROF== nothing\n") is None
    # Without the display name (parse_csv keeps numbers only), the numbers still pick the H100 SXM row.
    (metrics,) = ncu.parse_csv(_recorded("pointwise")).values()
    assert Target.from_ncu(metrics) == t.__class__(**{**t.__dict__, "name": "H100 SXM"})


def test_findings_record_the_peaks_they_used():
    metrics = ncu.parse_csv(_recorded("pointwise"))
    (f,) = ncu.findings(metrics)
    assert f.data["peaks"]["name"] == "H100 SXM" and f.data["peaks"]["dram_bytes_per_s"] == 2.964e12
    assert f.data["peaks"]["flops"]["fp32"] == 67e12 and "measured" in f.data["peaks"]["source"]
    assert f.data["peak_bytes_per_s"] == 2.964e12
    # The same counters read as an H200's (its clock and bus in the device attributes): its roofs.
    h200 = {k: v | {"device__attribute_memory_clock_rate": 3_201_000, "device__attribute_global_memory_bus_width": 6016}
            for k, v in metrics.items()}
    (g,) = ncu.findings(h200)
    assert g.data["peaks"]["name"] == "H200 SXM" and g.data["peak_bytes_per_s"] == 4.22e12
    assert g.data["ridge"] < f.data["ridge"] and g.data["gain_total_s"] > f.data["gain_total_s"]
    (n,) = ncu.findings(metrics, target=Target.from_properties(H200))
    assert n.data["peaks"]["name"] == "NVIDIA H200"  # an explicit target wins over the page's


def test_ridge_and_bound_change_with_the_peaks():
    """Where Nsight gives no Speed-of-Light percentages the bound comes from the peaks: 2.5 TB/s is
    84% of what a copy reaches on the H100 (2.964 TB/s) and 59% of what it reaches on an H200 (4.22)."""
    work = {roofline.TIME: 1e-3, roofline.DRAM_BYTES: 2.5e9,
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e8}
    h100 = roofline.classify(work, roofline.Peaks.of(H100))
    h200 = roofline.classify(work, roofline.Peaks.of(Target.from_properties(H200)))
    assert (h100.bound, h200.bound) == ("memory", "latency")
    assert h100.memory_pct == pytest.approx(100 * 2.5 / 2.964) and h200.memory_pct == pytest.approx(100 * 2.5 / 4.22)
    assert h100.ridge == pytest.approx(67e12 / 2.964e12) and h200.ridge == pytest.approx(67e12 / 4.22e12)
    assert h100.roofline_s == pytest.approx(2.5e9 / 2.964e12) and h200.roofline_s == pytest.approx(2.5e9 / 4.22e12)
    assert h200.gain_s > h100.gain_s  # more above the roofline on the faster memory
