"""Nsight Compute profiling without a GPU: CSV parsing, roofline classification, source mapping.

The CSV text and the three metric sets below are HAND-MADE: they follow the layout `ncu --csv
--page raw` prints (quoted fields, a units row under the header, thousands separators) and
plausible H100 figures, but no ncu produced them. They are to be replaced by recorded NCU reports
from the H100 in the next GPU session (the issue requires recorded fixtures).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.profiling import ncu, ncu_rules, roofline, source_map
from stitchcuda.target import Target

PW = "void stitch_pw0_kernel<4>(const float *, float *)"
RED = "void sc_red_rows<SumOp, Ix<(long)33, (long)65>, 4, 32, float, float, float>(SumOp, const float *)"

# Hand-made (see module docstring): 2 launches of a pointwise kernel, 1 of a reduction.
RAW_CSV = f'''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "stitch_pw0_kernel": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","launch__registers_per_thread","sm__throughput.avg.pct_of_peak_sustained_elapsed"
"","","","","","","","","","","","byte","%","nsecond","register/thread","%"
"0","4242","python3.12","127.0.0.1","{PW}","1","7","(256, 1, 1)","(4,224, 1, 1)","0","9.0","4,294,967,296","90.12","1,600,000","16","30.5"
"1","4242","python3.12","127.0.0.1","{RED}","1","7","(256, 1, 1)","(9, 1, 1)","0","9.0","8,704","1.20","3,100","32","0.8"
"2","4242","python3.12","127.0.0.1","{PW}","1","7","(256, 1, 1)","(4,224, 1, 1)","0","9.0","4,294,967,296","89.88","1,700,000","16","29.5"
==PROF== Disconnected from process 4242
'''

# Details page (`ncu --csv` without --page raw): one row per metric, units in their own column.
DETAILS_CSV = """"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","app","h","k(float*)","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","Mbyte","2,000.00"
"0","1","app","h","k(float*)","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,000.00"
"""

N_PW = 128 * 64 * 256 * 256  # elements of a [128, 64, 256, 256] fp32 tensor
# The device attributes Nsight Compute reports beside every launch, as the recorded H100 raw pages
# have them (tests/fixtures/recorded/h100-profiles): the roofline judges by the device in them.
H100_DEVICE = {
    "device__attribute_compute_capability_major": 9,
    "device__attribute_compute_capability_minor": 0,
    "device__attribute_multiprocessor_count": 132,
    "device__attribute_memory_clock_rate": 2_619_000,
    "device__attribute_global_memory_bus_width": 5120,
    "device__attribute_l2_cache_size": 52_428_800,
    "device__attribute_max_threads_per_multiprocessor": 2048,
    "device__attribute_max_shared_memory_per_block_optin": 232_448,
    "device__attribute_max_shared_memory_per_multiprocessor": 233_472,
}
H100 = roofline.Peaks.of(Target.named("h100"))
# Hand-made (see module docstring) metric sets, in the SI units parse_csv returns.
POINTWISE = H100_DEVICE | {  # relu(x * 2 + 1) over N_PW floats: one FFMA per element, read + write
    "gpu__time_duration.sum": 1.6e-3,
    "dram__bytes.sum": 2 * 4 * N_PW,
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": N_PW,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 90.0,
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 90.0,
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": 45.0,
    "l1tex__throughput.avg.pct_of_peak_sustained_active": 30.0,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 30.0,
}
K = 4096
NAIVE_MATMUL = H100_DEVICE | {  # one thread per output, K FFMAs each; A and B stay in L2, DRAM sees them once
    "gpu__time_duration.sum": 20e-3,
    "dram__bytes.sum": 3 * K * K * 4,
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": K**3,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 50.0,
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 1.0,
    "l1tex__throughput.avg.pct_of_peak_sustained_active": 50.0,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 85.0,
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 80.0,
}
TINY = H100_DEVICE | {  # 1024 floats, one block: the launch is the cost
    "gpu__time_duration.sum": 3e-6,
    "dram__bytes.sum": 8192,
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 1024,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 2.0,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 1.0,
    "launch__waves_per_multiprocessor": 0.01,
    "sm__warps_active.avg.pct_of_peak_sustained_active": 12.0,
}


# ---------------------------------------------------------------------------------------------
# CSV


def test_parse_raw_csv_units_commas_and_median() -> None:
    got = ncu.parse_csv(RAW_CSV)
    assert set(got) == {PW, RED}
    pw = got[PW]
    assert pw["launches"] == 2
    assert pw["gpu__time_duration.sum"] == pytest.approx(1.65e-3)  # median of 1.6 and 1.7 ms
    assert pw["dram__bytes.sum"] == 4_294_967_296
    assert pw["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(90.0)
    assert pw["launch__registers_per_thread"] == 16
    assert "Grid Size" not in pw and "Block Size" not in pw
    assert got[RED]["gpu__time_duration.sum"] == pytest.approx(3.1e-6)
    assert got[RED]["launches"] == 1


def test_parse_details_csv_scales_units() -> None:
    got = ncu.parse_csv(DETAILS_CSV)["k(float*)"]
    assert got["dram__bytes.sum"] == pytest.approx(2e9)
    assert got["gpu__time_duration.sum"] == pytest.approx(1e-3)


def test_parse_garbage_is_empty() -> None:
    assert ncu.parse_csv("==ERROR== ERR_NVGPUCTRPERM\nhello\n") == {}
    assert ncu.parse_csv("") == {}


def test_units() -> None:
    assert ncu._scale("Gbyte/second") == pytest.approx(1e9)
    assert ncu._scale("cycle/nsecond") == pytest.approx(1e9)
    assert ncu._scale("Kbyte") == 1e3
    assert ncu._scale("%") == 1.0


# ---------------------------------------------------------------------------------------------
# Roofline (hand-made metric sets: replace with recorded H100 reports)


def test_memory_bound_pointwise() -> None:
    c = roofline.classify(POINTWISE, H100)
    assert roofline.classify(POINTWISE) == c  # the device attributes in the metrics name the H100
    assert (c.bound, c.level) == ("memory", "dram")
    assert c.bytes_per_s == pytest.approx(8 * N_PW / 1.6e-3)  # 2.68 TB/s
    assert c.bytes_per_s / 1e12 == pytest.approx(2.684, abs=1e-3)
    assert c.flops_per_s == pytest.approx(2 * N_PW / 1.6e-3)
    assert c.intensity == pytest.approx(0.25)
    assert c.ridge == pytest.approx(67e12 / 2.964e12)
    assert c.roofline_s == pytest.approx(8 * N_PW / 2.964e12)
    assert c.gain_s == pytest.approx(1.6e-3 - 8 * N_PW / 2.964e12)


def test_compute_bound_naive_matmul() -> None:
    c = roofline.classify(NAIVE_MATMUL)
    assert (c.bound, c.level) == ("compute", "fma")
    flops = 2 * K**3
    assert c.flops == flops
    assert c.flops_per_s / 1e12 == pytest.approx(flops / 20e-3 / 1e12)  # 6.87 TFLOP/s
    assert c.intensity == pytest.approx(flops / (12 * K * K))  # 682.7 FLOP/B, far past the ridge
    assert c.intensity > c.ridge
    assert c.roofline_s == pytest.approx(flops / 67e12)
    assert any("tensor cores" in r for r in c.reasons)


def test_latency_bound_tiny_launch() -> None:
    c = roofline.classify(TINY)
    assert (c.bound, c.level) == ("latency", "launch")
    assert c.bytes_per_s == pytest.approx(8192 / 3e-6)
    assert c.flops == 1024
    assert any("waves" in r for r in c.reasons) and any("occupancy" in r for r in c.reasons)


def test_threshold_edges_and_derived_percentages() -> None:
    # Just under HIGH_PCT on both sides is latency; just over, the larger one wins.
    base = H100_DEVICE | {"gpu__time_duration.sum": 1e-3}
    lo = base | {roofline.MEM_PCT: 59.9, roofline.SM_PCT: 59.0}
    assert roofline.classify(lo).bound == "latency"
    assert roofline.classify(base | {roofline.MEM_PCT: 61.0, roofline.SM_PCT: 59.0}).bound == "memory"
    assert roofline.classify(base | {roofline.MEM_PCT: 61.0, roofline.SM_PCT: 70.0}).bound == "compute"
    # No SOL percentages recorded: derived from achieved bytes/s against the peak.
    only_bytes = base | {"dram__bytes.sum": 0.9 * 2.964e9}
    c = roofline.classify(only_bytes)
    assert c.memory_pct == pytest.approx(90.0) and c.bound == "memory"


def test_datasheet_and_measured_peaks() -> None:
    sxm = Target.named("h100")
    assert sxm.dram_bytes_per_s == 3.35e12 and sxm.measured_dram_bytes_per_s == 2.964e12
    assert sxm.tf32_flops == 494e12 and sxm.bf16_flops == 989e12
    # The roofline's memory roof is what a copy reached on the H100, not the datasheet's figure.
    assert (H100.dram_bytes_per_s, H100.flops["fp32"]) == (2.964e12, 67e12) and "measured" in H100.source
    m = H100.measured(dram_bytes_per_s=2.5e12, fp32=60e12)
    assert (m.dram_bytes_per_s, m.flops["fp32"], m.source) == (2.5e12, 60e12, "measured")
    assert H100.flops["fp32"] == 67e12  # the original object is untouched
    assert roofline.Peaks.from_dict(H100.as_dict()) == H100


# ---------------------------------------------------------------------------------------------
# Source mapping on real generated CUDA


class PwSum(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(x * 2 + 1), x.sum(dim=1)


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    m = PwSum()
    inputs = [torch.randn(33, 65)]
    plan = planner.plan_graph(graph.trace_module(m, inputs))
    assert plan.supported, plan.unsupported
    return coder_builtin.build_candidate(plan, PwSum, title="test").files


def _text(lines: list[str], r: source_map.Range) -> str:
    if r.start_line == r.end_line:
        return lines[r.start_line][r.start_col : r.end_col]
    body = [lines[r.start_line][r.start_col :], *lines[r.start_line + 1 : r.end_line]]
    return "\n".join([*body, lines[r.end_line][: r.end_col]])


def test_source_map_on_generated_cu(generated: dict[str, str]) -> None:
    smap = source_map.SourceMap.from_files(generated)
    (cu,) = [k for k in generated if k.endswith(".cu")]
    lines = generated[cu].split("\n")
    kernels = {f.name: f for f in smap.kernels()}
    launchers = {f.name: f for f in smap.functions if f.kind == "launcher"}
    pw = next(n for n in kernels if n.startswith("stitch_pw") and n.endswith("_kernel"))
    assert pw.removesuffix("_kernel") in launchers
    assert "sc_red_rows" in kernels and "sc_red_cols" in kernels
    for f in smap.functions:
        assert f.file == cu
        assert _text(lines, f.name_range) == f.name
        whole = _text(lines, f.range)
        assert whole.endswith("}")
        if f.kind == "global":
            assert whole.startswith(("template", "__global__")) and "__global__" in whole.split("{")[0]
        else:
            assert whole.startswith('extern "C"')
        assert f.range.start_line <= f.name_range.start_line <= f.range.end_line
    # No __host__-only helper or *_host entry is mistaken for a kernel.
    assert not any(n.endswith("_host") for n in kernels)

    hit = smap.lookup(f"void {pw}<4>(const float *, float *)")
    assert hit is kernels[pw] and hit.line == hit.name_range.start_line + 1
    assert smap.lookup(RED) is kernels["sc_red_rows"]
    assert smap.lookup("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32") is None


@pytest.mark.parametrize("filt", [True, False])
def test_mangled_names(monkeypatch: pytest.MonkeyPatch, filt: bool) -> None:
    if not filt:
        monkeypatch.setattr(source_map, "_cxxfilt", lambda: None)
    elif source_map._cxxfilt() is None:
        pytest.skip("c++filt is not installed")
    assert source_map.base_name("_Z17stitch_pw0_kernelILi4EEvPKfPf") == "stitch_pw0_kernel"
    assert source_map.base_name("_ZN2sc6detail4stepEv") == "step"
    assert source_map.base_name("void (anonymous namespace)::k2<float>(float*)") == "k2"


def test_utf16_columns() -> None:
    src = "// x\n/* é😀 */ __global__ void k(float* y) { y[0] = 1; }\n"
    (f,) = source_map.parse(src, "a.cu")
    # é is one UTF-16 unit (2 bytes), 😀 two (4 bytes): "k" is at byte 29 but UTF-16 column 26.
    assert f.name_range == source_map.Range(1, 26, 1, 27)
    assert f.range.start_col == 10


# ---------------------------------------------------------------------------------------------
# Command, findings, feedback


def test_command_filters_generated_kernels() -> None:
    argv = ncu.command(["python3", "bench.py"], ["stitch_pw0_kernel", "sc_red_rows"], launch_count=6)
    assert argv[:3] == ["ncu", "--clock-control", "none"]
    assert argv[argv.index("--kernel-name") + 1] == "regex:^(sc_red_rows|stitch_pw0_kernel)(<.*>)?$"
    assert argv[argv.index("--launch-count") + 1] == "6" and argv[argv.index("--kill") + 1] == "yes"
    assert {"--csv", "--page", "raw"} <= set(argv) and argv[-2:] == ["python3", "bench.py"]
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert "gpu__time_duration.sum" in metrics and "dram__bytes.sum" in metrics
    rep = ncu.command(["a.out"], [], report=ncu.Path("r"), section_set="full")
    assert "--csv" not in rep and rep[rep.index("--export") + 1] == "r" and "--kernel-name" not in rep
    assert "--kill" not in rep  # no launch count: the application runs to its end


def test_ncu_absent_is_a_note(generated: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    prof = ncu.profile_candidate(tmp_path / "request.json", generated)
    assert prof.findings == [] and prof.notes == [ncu.NO_NCU] and "not installed" in prof.notes[0]


def test_findings_and_feedback(generated: dict[str, str]) -> None:
    smap = source_map.SourceMap.from_files(generated)
    pw = next(f for f in smap.kernels() if f.name.startswith("stitch_pw"))
    by_kernel = {
        f"void {pw.name}<4>(const float *, float *)": POINTWISE | {"launches": 2.0},
        RED: TINY | {"launches": 1.0},
        "ampere_sgemm_128x64_nn": NAIVE_MATMUL | {"launches": 1.0},
    }
    found = ncu.findings(by_kernel, smap)
    assert [f.code for f in found] == ["compute-bound", "memory-bound", "latency-bound"]  # by gain
    mm, pwf, tiny = found
    assert mm.file is None and mm.line is None and mm.severity == "warning"
    assert (pwf.file, pwf.line) == (pw.file, pw.line)
    assert pwf.data["gain_total_s"] == pytest.approx(2 * (1.6e-3 - 8 * N_PW / 2.964e12))
    total = 20e-3 + 2 * 1.6e-3 + 3e-6
    assert mm.data["gain_share"] == pytest.approx((20e-3 - 2 * K**3 / 67e12) / total)
    assert tiny.severity == "info" and tiny.line == smap.lookup(RED).line
    assert all("\n" not in f.message for f in found)
    assert "2684 GB/s" in pwf.message and "AI 0.25" in pwf.message

    text = ncu.feedback_text(found)
    lines = text.splitlines()
    assert lines[1].startswith("1. ampere_sgemm_128x64_nn: compute-bound")
    assert text.index("memory-bound") < text.index("latency-bound")
    assert f"[{pw.file}:{pw.line}]" in text
    assert ncu.feedback_text([]) == "Profile: no kernel findings."


@pytest.mark.skipif(ncu.find_ncu() is not None, reason="ncu is installed here: the no-ncu path is not reachable")
def test_profile_candidate_without_ncu_degrades(generated: dict[str, str], tmp_path) -> None:
    prof = ncu.profile_candidate(tmp_path / "request.json", generated)
    assert prof.findings == [] and prof.notes == [ncu.NO_NCU] and prof.seconds == 0.0


def test_profile_candidate_without_kernels(tmp_path) -> None:
    prof = ncu.profile_candidate(tmp_path / "request.json", {"model_new.py": "x = 1", "k.cu": "int f() { return 1; }"})
    assert prof.findings == [] and "no __global__ kernels" in prof.notes[0]


@pytest.mark.gpu
def test_verifier_profiles_an_accepted_candidate(tmp_path, monkeypatch) -> None:
    """End to end on the GPU: the Verifier runs ncu on the built-in coder's kernels, the verdict
    carries one memory-bound Finding on the pointwise kernel's source line, within the 30 s budget."""
    from pathlib import Path

    from stitchcuda.agents.verify.verifier import VerifyOptions, verify
    from stitchcuda.types import Task

    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    if ncu.find_ncu() is None:
        pytest.skip("ncu is not installed")
    ref = Path(__file__).parent / "fixtures" / "profile_src" / "pointwise_ref.py"
    task = Task(path=ref)
    cand = coder_builtin.code(task, planner.plan(task))
    v = verify(task, cand, tmp_path / "run", VerifyOptions(time_compile=False, random_sets=2, adversarial=(), trials=10))
    assert v.accepted, v.message
    assert v.phases["ncu"] <= 30.0, v.notes
    assert [f.code for f in v.findings] == ["memory-bound"], v.notes
    f = v.findings[0]
    smap = source_map.SourceMap.from_files(cand.files)
    assert (f.file, f.line) == (smap.lookup(f.kernel).file, smap.lookup(f.kernel).line)
    assert (tmp_path / "run" / "ncu.csv").exists()
    assert (tmp_path / "run" / "ncu.ncu-rep").stat().st_size > 0, v.notes
    timed = {source_map.base_name(k): us for k, us in v.kernel_us.items()}  # the Verifier's own timeline
    assert timed.get(source_map.base_name(f.kernel), 0) > 0, v.kernel_us


def test_kernel_names_by_pattern_match_tree_sitter(generated: dict[str, str]) -> None:
    """The no-tree-sitter fallback finds the same __global__ functions, launch bounds included."""
    from pathlib import Path

    mm = {"m.cu": (Path(__file__).parent / "fixtures" / "profile_src" / "matmul_kernels.cu").read_text()}
    for files in (generated, mm):
        assert ncu.kernel_names(files) == sorted(f.name for f in source_map.SourceMap.from_files(files).kernels())
    assert ncu.kernel_names(mm) == ["naive_matmul_kernel", "tiled_matmul_kernel", "vec_matmul_kernel"]


# ---------------------------------------------------------------------------------------------
# The runner against a stand-in `ncu` executable (no Nsight Compute here): what it does with
# ncu's answers, not what ncu measures.

_FAKE_NCU = """#!/bin/sh
echo "$@" >> "{log}"
case "$*" in
  --import*) [ -s "$2" ] && cat "{csv}"; exit 0 ;;
  *{perm}*) echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"; exit 1 ;;
  *launch__shared_mem_per_block_static*) echo "==ERROR== Failed to find metric launch__shared_mem_per_block_static"; exit 1 ;;
esac
# The profile: a report file where --export says (its raw page is the CSV above, read back with
# --import; its rule results are the stand-in reader's business).
prev=""
for a in "$@"; do [ "$prev" = "--export" ] && echo "report" > "$a"; prev="$a"; done
case "$*" in *--export*) exit 0 ;; esac
cat "{csv}"
"""

# A stand-in for Nsight Compute's report reader, where NCU keeps it (extras/python beside ncu): the
# rule results of the report as ncu_report's API gives them, from rules.json beside it.
_FAKE_READER = """
import enum, json, pathlib

class MsgType(enum.IntEnum):
    NONE = 0
    OK = 1
    OPTIMIZATION = 2
    WARNING = 3

class SpeedupType(enum.IntEnum):
    UNKNOWN = 0
    LOCAL = 1
    GLOBAL = 2

class _Action:
    def __init__(self, name, rules):
        self._name, self._rules = name, rules
    def name(self):
        return self._name
    def rule_results_as_dicts(self):
        # As the real reader does: the message and speedup types as plain ints.
        out = []
        for r in self._rules:
            r = dict(r, rule_message=dict(r["rule_message"], type=int(MsgType[r["rule_message"]["type"]])))
            if "speedup_estimation" in r:
                r["speedup_estimation"] = dict(r["speedup_estimation"],
                                               type=int(SpeedupType[r["speedup_estimation"]["type"]]))
            out.append(r)
        return out

class _Range:
    def __init__(self, actions):
        self._actions = actions
    def num_actions(self):
        return len(self._actions)
    def action_by_idx(self, i):
        return self._actions[i]

class _Context:
    def __init__(self, ranges):
        self._ranges = ranges
    def num_ranges(self):
        return len(self._ranges)
    def range_by_idx(self, i):
        return self._ranges[i]

def load_report(path):
    # Each kernel launched twice (the runner profiles two forwards): two actions, the same rules.
    rules = json.loads((pathlib.Path(__file__).parent / "rules.json").read_text())
    return _Context([_Range([_Action(k, v) for k, v in rules.items() for _ in range(2)])])
"""


def _fake_ncu(tmp_path, monkeypatch, perm: str = "never-matches", rules: dict | None = None):
    csv_file, log = tmp_path / "raw.csv", tmp_path / "calls.log"
    csv_file.write_text(RAW_CSV)
    tool = tmp_path / "bin" / "ncu"
    tool.parent.mkdir()
    tool.write_text(_FAKE_NCU.format(log=log, csv=csv_file, perm=perm))
    tool.chmod(0o755)
    if rules is not None:
        extras = tool.parent / "extras" / "python"
        extras.mkdir(parents=True)
        (extras / "ncu_report.py").write_text(_FAKE_READER)
        (extras / "rules.json").write_text(json.dumps(rules))
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    return log


def test_runner_retries_without_the_launch_extras(generated, tmp_path, monkeypatch):
    log = _fake_ncu(tmp_path, monkeypatch)
    prof = ncu.profile_candidate(tmp_path / "request.json", generated, timeout_s=30)
    calls = [c for c in log.read_text().splitlines() if "--metrics" in c]  # the metrics passes
    assert len(calls) == 2 and "launch__shared_mem_per_block_static" in calls[0]
    assert "launch__shared_mem_per_block_static" not in calls[1] and "--clock-control none" in calls[1]
    assert "regex:^(" in calls[1]  # only the candidate's own kernels
    assert {f.code for f in prof.findings} == {"memory-bound", "latency-bound"}
    assert prof.notes[0].startswith("Nsight Compute: 2 kernel(s)") and prof.csv


def test_runner_without_counter_permission_says_so_once(generated, tmp_path, monkeypatch):
    log = _fake_ncu(tmp_path, monkeypatch, perm="--clock-control")
    prof = ncu.profile_candidate(tmp_path / "request.json", generated, timeout_s=30)
    assert len(log.read_text().splitlines()) == 1
    assert prof.findings == [] and "no permission to read GPU performance counters" in prof.notes[0]


def _rule(rid: str, title: str, kind: str, speedup: float | None, message: str = "") -> dict:
    rule = {"rule_identifier": rid, "name": rid, "section_identifier": "SpeedOfLight",
            "rule_message": {"title": title, "message": message, "type": kind}}
    if speedup is not None:
        rule["speedup_estimation"] = {"type": "LOCAL", "speedup": speedup}
    return rule


def test_ncu_rule_messages_join_the_findings(generated, tmp_path, monkeypatch):
    """The profiling run also collects the basic sections into its report; its actionable rule
    results (not the OK ones) go on the kernel's finding, largest estimated speedup first, links
    stripped; the metrics come from the same report's raw page."""
    rules = {PW: [
        _rule("SOLBottleneck", "Memory is more heavily utilized than Compute", "OK", None),
        _rule("LaunchConfiguration", "Small grid", "WARNING", 12.0),
        _rule("MemoryCoalescing", "Uncoalesced global accesses", "OPTIMIZATION", 38.5,
              "See the @section:MemoryWorkloadAnalysis:Memory Workload Analysis@ section."),
    ]}
    log = _fake_ncu(tmp_path, monkeypatch, rules=rules)
    prof = ncu.profile_candidate(tmp_path / "request.json", generated, timeout_s=30)
    calls = log.read_text().splitlines()
    # One profiling run, counters and sections together (after the stand-in's refusal of the
    # launch extras, as in test_runner_retries_without_the_launch_extras).
    first, profile = [c for c in calls if "--export" in c]
    assert "--set basic" in profile and "--metrics" in profile and "launch__shared_mem_per_block_static" in first
    report = profile.split("--export ")[1].split()[0]
    assert [c for c in calls if c.startswith("--import")] == [f"--import {report} --csv --page raw --print-units base"]
    pw = next(f for f in prof.findings if source_map.base_name(f.kernel or "") == "stitch_pw0_kernel")
    got = pw.data["ncu_rules"]
    assert [r["rule"] for r in got] == ["MemoryCoalescing", "LaunchConfiguration"]  # once each, OK dropped
    assert got[0]["message"] == "See the Memory Workload Analysis section."
    assert got[0]["type"] == "OPTIMIZATION" and got[0]["speedup_type"] == "LOCAL"
    assert pw.message.endswith("NCU MemoryCoalescing: Uncoalesced global accesses (NCU est. speedup 38%, local)")
    other = next(f for f in prof.findings if f is not pw)
    assert "ncu_rules" not in other.data
    assert not any(n.startswith("NCU rule messages") for n in prof.notes)


def _reader_on_path(folder: Path, monkeypatch: pytest.MonkeyPatch, module: str, rules: dict | None = None) -> None:
    """`module` as ncu_report, first on the reader child's import path (ahead of the ncu-report
    package the test extras install)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ncu_report.py").write_text(module)
    if rules is not None:
        (folder / "rules.json").write_text(json.dumps(rules))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]))


# As Python reports an ncu_report that is nowhere on the path.
_NOT_INSTALLED = "raise ModuleNotFoundError(\"No module named 'ncu_report'\", name='ncu_report')\n"


def test_without_a_report_reader_the_findings_stand_and_a_note_says_why(generated, tmp_path, monkeypatch):
    log = _fake_ncu(tmp_path, monkeypatch)
    monkeypatch.setattr(ncu_rules, "reader_paths", lambda tool: [])
    _reader_on_path(tmp_path / "no-reader", monkeypatch, _NOT_INSTALLED)
    prof = ncu.profile_candidate(tmp_path / "request.json", generated, timeout_s=30)
    assert {f.code for f in prof.findings} == {"memory-bound", "latency-bound"}
    assert all("ncu_rules" not in f.data for f in prof.findings)
    assert f"NCU rule messages: {ncu_rules.NOT_INSTALLED}" in prof.notes, prof.notes
    assert ncu_rules.NOT_INSTALLED.endswith("pip install ncu-report")
    # No profiling run of its own for the rules: the two are the metric sets' (the launch extras refused).
    assert len([c for c in log.read_text().splitlines() if "--export" in c]) == 2


def test_without_ncu_the_interpreters_own_reader_reads_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded report in CI: no ncu, so no folder of NCU's is searched; the ncu_report this
    interpreter imports (the ncu-report package) reads it. One that is there but cannot load says
    its own error; one that is not there says how to install it."""
    def no_search(tool: str) -> list[str]:
        raise AssertionError(f"searched for NCU's reader beside {tool!r}")

    monkeypatch.setattr(ncu_rules, "reader_paths", no_search)
    report = tmp_path / "rules.ncu-rep"
    report.write_text("report\n")
    rules = {PW: [_rule("LaunchConfiguration", "Small grid", "WARNING", 12.0),
                  _rule("MemoryCoalescing", "Uncoalesced", "OPTIMIZATION", 38.5)]}
    _reader_on_path(tmp_path / "site", monkeypatch, _FAKE_READER, rules)
    got, why = ncu_rules.read_rules(report, None, 30)
    assert why == "" and [r["rule"] for r in got["stitch_pw0_kernel"]] == ["MemoryCoalescing", "LaunchConfiguration"]
    _reader_on_path(tmp_path / "broken", monkeypatch,
                    "raise ImportError('libnvperf_host.so: cannot open shared object file')\n")
    got, why = ncu_rules.read_rules(report, None, 30)
    assert got == {} and why == "NCU's report reader (ncu_report) failed: ImportError: libnvperf_host.so: " \
                                "cannot open shared object file"
    _reader_on_path(tmp_path / "none", monkeypatch, _NOT_INSTALLED)
    assert ncu_rules.read_rules(report, None, 30) == ({}, ncu_rules.NOT_INSTALLED)


def test_the_report_is_kept_where_asked(generated: dict[str, str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """For the user to open in Nsight Compute's UI; a later profile that writes none leaves none of
    the earlier one's behind to pass for its own."""
    log = _fake_ncu(tmp_path, monkeypatch, rules={PW: [_rule("LaunchConfiguration", "Small grid", "WARNING", 12.0)]})
    keep = tmp_path / "run" / "ncu.ncu-rep"
    prof = ncu.profile_candidate(tmp_path / "request.json", generated, timeout_s=30, keep_report=keep)
    call = [c for c in log.read_text().splitlines() if "--export" in c][-1]
    assert f"--export {keep} " in call
    assert keep.read_text() == "report\n"
    assert any(f.data.get("ncu_rules") for f in prof.findings)
    (tmp_path / "later").mkdir()
    _fake_ncu(tmp_path / "later", monkeypatch, perm="--clock-control")  # this one fails: no report
    prof = ncu.profile_candidate(tmp_path / "request.json", generated, timeout_s=30, keep_report=keep)
    assert "ERR_NVGPUCTRPERM" in prof.notes[0] and not keep.exists()


# The Verifier's timeline of one forward: its kernels' GPU microseconds, library kernels too.
TIMED = {"void stitch_k1_kernel<4>(const float*, float*)": 900.0, "sm90_xmma_gemm_f32f32": 5000.0,
         "void stitch_pw0_kernel<4>(const float*, float*)": 60.0, "sc_red_rows": 40.0}


def test_the_hottest_kernels_are_profiled_where_not_all_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate of one kernel per layer: the kernels that hold most of its own GPU time are
    named to ncu, in that order, the launches bounded; what was left out is said."""
    names = ["stitch_k1_kernel", "stitch_pw0_kernel", "sc_red_rows", "never_launched"]
    chosen, note = ncu.hot_kernels(names, TIMED)
    assert chosen == ["stitch_k1_kernel", "stitch_pw0_kernel"]  # 960 of 1000 us: past the 95% share
    assert note == "profiled the 2 kernels with the most GPU time of the 3 the candidate launched (96% of their time)"
    monkeypatch.setattr(ncu, "MAX_KERNELS", 1)
    assert ncu.hot_kernels(names, TIMED) == (["stitch_k1_kernel"], "profiled the 1 kernels with the most GPU time "
                                             "of the 3 the candidate launched (90% of their time)")
    monkeypatch.undo()
    assert ncu.hot_kernels(names, None) == (sorted(names), "")  # no timeline: every kernel by name
    assert ncu.hot_kernels(names, {"sm90_xmma_gemm_f32f32": 5.0}) == (sorted(names), "")  # none of ours timed
    assert ncu.hot_kernels(["stitch_k1_kernel"], TIMED) == (["stitch_k1_kernel"], "")

    files = {"k.cu": "\n".join(f"__global__ void {n}(float* y) {{ y[0] = 1; }}" for n in names)}
    log = _fake_ncu(tmp_path, monkeypatch)
    prof = ncu.profile_candidate(tmp_path / "request.json", files, timeout_s=30, kernel_us=TIMED)
    call = [c for c in log.read_text().splitlines() if "--export" in c][-1]
    assert "regex:^(stitch_k1_kernel|stitch_pw0_kernel)(<.*>)?$" in call and "--launch-count 4" in call
    assert prof.notes[1].startswith("profiled the 2 kernels with the most GPU time"), prof.notes
    # With the launches of one forward counted: those of the chosen kernels, and ncu stops there.
    launches = {"void stitch_k1_kernel<4>(const float*, float*)": 3, "sm90_xmma_gemm_f32f32": 7,
                "void stitch_pw0_kernel<4>(const float*, float*)": 1, "sc_red_rows": 5}
    ncu.profile_candidate(tmp_path / "request.json", files, timeout_s=30, kernel_us=TIMED, kernel_launches=launches)
    call = [c for c in log.read_text().splitlines() if "--export" in c][-1]
    assert "--launch-count 4 --kill yes" in call
    launches["void stitch_k1_kernel<4>(const float*, float*)"] = 40
    ncu.profile_candidate(tmp_path / "request.json", files, timeout_s=30, kernel_us=TIMED, kernel_launches=launches)
    assert f"--launch-count {ncu.MAX_LAUNCHES} " in [c for c in log.read_text().splitlines() if "--export" in c][-1]


def test_kernel_times_sum_launches_and_leave_out_the_marker() -> None:
    from stitchcuda.agents.verify.dynamic_check import MARKER, kernel_times

    timeline = [{"name": "a", "start": 0.0, "end": 2.0}, {"name": "b", "start": 2.0, "end": 7.0},
                {"name": "a", "start": 7.0, "end": 11.0}, {"name": f"void {MARKER}(long)", "start": 11.0, "end": 60.0}]
    us, launches = kernel_times(timeline)
    assert us == {"a": 6.0, "b": 5.0} and list(us) == ["a", "b"] and launches == {"a": 2, "b": 1}


def test_ncu_rule_summary_keeps_whole_words():
    """The rule the H100 reported for a generated pointwise kernel (live e2e run, 2026-11-23) has an
    empty title; its message is three sentences. The diagnostic line takes the first, cut at a word
    with an ellipsis, not mid-word."""
    rule = {"rule": "AchievedOccupancy", "title": "", "speedup": 17.16, "speedup_type": "LOCAL",
            "message": "The difference between calculated theoretical (100.0%) and measured achieved occupancy "
                       "(82.8%) can be the result of warp scheduling overheads or workload imbalances during the "
                       "kernel execution. Load imbalances can occur between warps within a block as well as "
                       "across blocks of the same kernel."}
    line = ncu_rules.summary(rule)
    assert line.startswith("NCU AchievedOccupancy: The difference between calculated theoretical (100.0%)")
    assert line.endswith("… (NCU est. speedup 17%, local)")
    text = line.removeprefix("NCU AchievedOccupancy: ").removesuffix("… (NCU est. speedup 17%, local)")
    assert rule["message"].startswith(text) and rule["message"][len(text)] == " "
    assert len(text) <= ncu_rules.SUMMARY_CHARS
    short = dict(rule, message="Few blocks. More text here.", speedup=None)
    assert ncu_rules.summary(short) == "NCU AchievedOccupancy: Few blocks."
