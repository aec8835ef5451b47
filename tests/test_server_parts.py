"""The language server's plain parts without a client: module scanning, diagnostics, proposals,
and the replay of recorded GPU verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc
from lsprotocol import types as lsp

from stitchcuda.agents import graph
from stitchcuda.agents.coder import builtin as coder_builtin
from stitchcuda.agents.plan import planner
from stitchcuda.agents.verify import replay
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.profiling import ncu, source_map
from stitchcuda.server import diagnostics, modules, proposal
from stitchcuda.types import Candidate, Finding, Task, Verdict

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "bench" / "results" / "2026-11-23-h100-example-gated_block.json"

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_scan_finds_modules_through_aliases_and_local_bases() -> None:
    text = (
        "import torch\nfrom torch import nn\nfrom torch.nn import Module\n"
        "class A(nn.Module): pass\nclass B(torch.nn.Module): pass\nclass C(Module): pass\n"
        "class D(A):\n    class Inner(nn.Module):\n        pass\nclass NotOne(object): pass\n"
    )
    found = modules.scan(text)
    assert [m.name for m in found.modules] == ["A", "B", "C", "D", "Inner"]
    assert found.module_at(7).name == "Inner" and found.module_at(6).name == "D"
    assert found.module_at(9) is None and found.missing_task_functions == ["get_inputs", "get_init_inputs"]


def test_scan_columns_are_utf16() -> None:
    # "𝔘" is one code point, two UTF-16 units, four UTF-8 bytes.
    found = modules.scan("import torch.nn as nn\nx = '𝔘'; y = 1\nclass Ünï𝔘(nn.Module):\n    pass\n")
    (m,) = found.modules
    assert m.name == "Ünï𝔘" and (m.name_range.start_col, m.name_range.end_col) == (6, 6 + 5)


def test_scan_survives_unclosed_brackets() -> None:
    text = "import torch.nn as nn\nclass A(nn.Module):\n    pass\nbad = foo(\nclass B(nn.Module):\n    def forward(self, x):\n        return x\n\nclass C(B):\n    pass\n"
    found = modules.scan(text)
    assert [m.name for m in found.modules] == ["A", "B", "C"]
    b = found.module("B")
    assert (b.range.start_line, b.range.end_line) == (4, 6)


def test_scaffold_is_valid_python_naming_forward_args() -> None:
    (m,) = modules.scan("import torch.nn as nn\nclass N(nn.Module):\n    def __init__(self, d, *, k=3):\n"
                        "        super().__init__()\n    def forward(self, a, b=None, *rest):\n        return a\n").modules
    assert (m.init_params, m.forward_params) == (["d", "k"], ["a", "b"])
    code = "import torch\n" + modules.scaffold(m)
    ns: dict = {}
    exec(compile(code, "scaffold", "exec"), ns)  # noqa: S102 - our own generated text
    assert ns["get_init_inputs"]() == [None, None] and [t.shape for t in ns["get_inputs"]()] == [(16, 64)] * 2


class PwSum(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(x * 2 + 1), x.sum(dim=1)


def test_kernel_findings_are_anchored_on_kernel_names() -> None:
    """Findings built by the real ncu.findings over a generated .cu (metric values hand-made, as
    in test_profile_ncu) land on the kernel's name in its definition, with hover numbers."""
    from test_profile_ncu import NAIVE_MATMUL, POINTWISE

    plan = planner.plan_graph(graph.trace_module(PwSum(), [torch.randn(33, 65)]))
    files = coder_builtin.build_candidate(plan, PwSum, title="t").files
    smap = source_map.SourceMap.from_files(files)
    pw = next(f for f in smap.kernels() if f.name.startswith("stitch_pw"))
    red = next(f for f in smap.kernels() if f.name.startswith("sc_red_rows"))
    found = ncu.findings({f"void {pw.name}<4>(const float *, float *)": POINTWISE | {"launches": 1.0},
                          f"void {red.name}<X>(float)": NAIVE_MATMUL | {"launches": 1.0}}, smap)
    by_file = diagnostics.kernel_findings(found)
    (cu,) = by_file
    lines = files[cu].split("\n")
    got = {a.diagnostic.code: a for a in by_file[cu]}
    assert set(got) == {"memory-bound", "compute-bound"}
    for code, fn in (("memory-bound", pw), ("compute-bound", red)):
        r = got[code].diagnostic.range
        assert lines[r.start.line][r.start.character:r.end.character] == fn.name
    # Severity by estimated gain: the pointwise kernel runs at 90% of DRAM peak (little to gain),
    # the matmul far under the FMA roofline.
    assert got["compute-bound"].diagnostic.severity == lsp.DiagnosticSeverity.Warning
    assert got["memory-bound"].diagnostic.severity == lsp.DiagnosticSeverity.Information
    hov = got["memory-bound"].hover
    assert "DRAM bandwidth | 2684 GB/s of 2964 GB/s" in hov and "arithmetic intensity | 0.25" in hov
    pos = got["memory-bound"].diagnostic.range.start
    assert diagnostics.hover_at(by_file[cu], pos) == hov
    assert "Nsight Compute's rules" not in hov  # none were read for these findings


def test_kernel_hover_lists_ncu_rules() -> None:
    f = Finding("memory-bound", "k: memory-bound", kernel="k", data={
        "ncu_rules": [{"rule": "MemoryCoalescing", "title": "Uncoalesced global accesses", "speedup": 38.4,
                       "message": "See the Memory Workload Analysis section."},
                      {"rule": "LaunchConfiguration", "title": "Small grid", "speedup": None, "message": ""}]})
    hov = diagnostics.kernel_hover(f)
    assert "Nsight Compute's rules:\n- **MemoryCoalescing** (est. speedup 38%): Uncoalesced global accesses." in hov
    assert hov.endswith("- **LaunchConfiguration**: Small grid.")


def test_verdict_problems_point_into_the_candidate() -> None:
    v = Verdict("r1-x", "hacked", built=True, hack_findings=[
        Finding("torch-compute-in-forward", "torch.relu in forward", file="model_new.py", line=12)])
    (f,) = diagnostics.verdict_problems(v, "model_new.py")["model_new.py"]
    assert f.diagnostic.range.start.line == 11 and f.diagnostic.code == "torch-compute-in-forward"
    bad = Verdict("r2-y", "build-failed", build_log="a.cu(3): error: identifier x is undefined\n", message="nvcc failed")
    (g,) = diagnostics.verdict_problems(bad, "model_new.py")["model_new.py"]
    assert "identifier x is undefined" in g.diagnostic.message
    assert diagnostics.verdict_problems(Verdict("r3", "unverified"), "model_new.py") == {}
    # The editor shows the message itself: no hover repeats it.
    assert diagnostics.hover_at([f, g], lsp.Position(11, 0)) is None


def test_hot_op_hover_adds_to_the_diagnostic_instead_of_repeating_it() -> None:
    profile = {"clock": "cuda", "device": "NVIDIA H100 80GB HBM3", "notes": ["CUDA kernel time per iteration"],
               "ops": [{"op": "aten::addmm", "module": "fc", "file": "/w/m.py", "line": 11, "share": 0.724,
                        "time_us": 90.5, "calls": 1},
                       {"op": "aten::relu", "module": "", "file": "/w/m.py", "line": 12, "share": 0.276,
                        "time_us": 34.5, "calls": 2}]}
    top, relu = diagnostics.profile_lines(profile, "/w/m.py")
    assert top.diagnostic.message == "addmm: 72% of GPU time in fc, 90.5 us per forward"
    assert top.hover == ("**addmm** in the reference's profile: op 1 of 2 by GPU time (72.4%), 1 call per forward; "
                         "measured on NVIDIA H100 80GB HBM3 (CUDA kernel time per iteration)")
    assert top.diagnostic.message not in top.hover and "2 calls per forward" in relu.hover


def test_proposal_edit_and_diff(tmp_path: Path) -> None:
    folder = proposal.target_folder(tmp_path / "blk.py", None)
    assert folder == tmp_path / "blk_stitchcuda"
    assert proposal.target_folder(tmp_path / "blk.py", "gen", tmp_path) == tmp_path / "gen"
    files = {"model_new.py": "class ModelNew: ...\n", "k.cu": "__global__ void k() {}\n"}
    edit = proposal.workspace_edit(files, folder)
    kinds = [type(c).__name__ for c in edit.document_changes]
    assert kinds == ["CreateFile", "TextDocumentEdit"] * 2 and edit.document_changes[0].options.overwrite
    folder.mkdir()
    (folder / "k.cu").write_text("old\n")
    d = proposal.diff(files, folder)
    assert f"--- {folder / 'k.cu'}" in d and "-old" in d and "+__global__ void k() {}" in d
    assert "--- /dev/null" in d and f"+++ {folder / 'model_new.py'}" in d


def test_replay_overlays_gpu_results_only_on_a_real_build(tmp_path: Path) -> None:
    rec = replay.load(RECORDED)
    cand = Candidate("r1-builtin-pointwise", {"model_new.py": "x = 1\n"})
    built = Verdict(cand.name, "unverified", built=True, build_s=1.5)
    got = replay.overlay(built, rec, cand, str(RECORDED))
    assert got.accepted and got.ours.median_ms == pytest.approx(0.1683, abs=1e-4) and got.build_s == 1.5
    assert any(n.startswith("REPLAYED") and "matched by candidate name" in n for n in got.notes)
    failed = Verdict(cand.name, "build-failed", built=False)
    assert replay.overlay(failed, rec, cand, "x").status == "build-failed"
    other = replay.overlay(Verdict("r9-z", "unverified", built=True), rec, Candidate("r9-z", {}), "x")
    assert other.status == "unverified" and "no recorded GPU verdict" in other.notes[-1]
    # A recording that names files by digest matches by content, whatever the name.
    by_files = {"attempts": [{"candidate": "other", "files_sha256": replay.files_digest(cand.files),
                              "verdict": rec["attempts"][0]["verdict"]}]}
    hit = replay.overlay(Verdict(cand.name, "unverified", built=True), by_files, cand, "x")
    assert hit.accepted and "identical files" in hit.notes[-1]
    # Per-file digests: the same kernel sources around another Python module match, and say so;
    # other kernel sources never do, whatever the module.
    recorded = {"k.cu": "__global__ void k() {}\n", "model_new.py": "x = 1\n"}
    by_kernels = {"attempts": [{"candidate": "other", "files_sha256": replay.files_digest(recorded),
                                "files_sha256_each": replay.file_digests(recorded),
                                "verdict": rec["attempts"][0]["verdict"]}]}
    same_kernels = Candidate("r1-x", {**recorded, "model_new.py": "x = 2\n"})
    hit = replay.overlay(Verdict("r1-x", "unverified", built=True), by_kernels, same_kernels, "x")
    assert hit.accepted and "identical kernel sources" in hit.notes[-1]
    other_kernels = Candidate("r1-x", {**recorded, "k.cu": "__global__ void k() { }\n"})
    miss = replay.overlay(Verdict("r1-x", "unverified", built=True), by_kernels, other_kernels, "x")
    assert miss.status == "unverified" and "no recorded GPU verdict" in miss.notes[-1]


@needs_nvcc
def test_verify_with_replay_builds_for_real(tmp_path: Path) -> None:
    """No GPU: the example's candidate is compiled here, then takes the H100's recorded results."""
    if torch.cuda.is_available():
        pytest.skip("replay applies where there is no GPU")
    task = Task(path=ROOT / "examples" / "gated_block.py", class_name="Block")
    cand = coder_builtin.code(task, planner.plan(task))
    cand.name = "r1-" + cand.name
    v = verify(task, cand, tmp_path / "run", VerifyOptions(replay=str(RECORDED)))
    assert v.built and v.build_s is not None and v.accepted and v.speedup_eager == pytest.approx(5.22, abs=0.01)
    assert json.loads((tmp_path / "run" / "verdict.json").read_text())["accepted"] is True


def test_results_page_tables_and_roofline() -> None:
    """The results view's page: one row per attempt, the proposal's kernels, and a roofline SVG
    with a point per kernel that did floating-point work (metric values hand-made, see
    test_profile_ncu)."""
    import xml.etree.ElementTree as ET

    from test_profile_ncu import NAIVE_MATMUL, POINTWISE

    from stitchcuda.server import results

    plan = planner.plan_graph(graph.trace_module(PwSum(), [torch.randn(33, 65)]))
    files = coder_builtin.build_candidate(plan, PwSum, title="t").files
    smap = source_map.SourceMap.from_files(files)
    pw = next(f for f in smap.kernels() if f.name.startswith("stitch_pw"))
    red = next(f for f in smap.kernels() if f.name.startswith("sc_red_rows"))
    found = ncu.findings({pw.name: POINTWISE | {"launches": 1.0}, red.name: NAIVE_MATMUL | {"launches": 1.0}}, smap)
    rec = replay.load(RECORDED)
    verdict = dict(rec["attempts"][0]["verdict"], findings=[f.__dict__ for f in found])
    summary = {"best": "r1-x", "attempts": [
        {"candidate": "r1-x", "verdict": verdict},
        {"candidate": "r2-y", "verdict": {"candidate": "r2-y", "status": "build-failed", "message": "nvcc <failed>"}}]}
    page = results.html(summary, "StitchCUDA: Block", "proposal r1-x")
    assert "<script" not in page and "nvcc &lt;failed&gt;" in page
    assert page.count("<tr><td>r1-x (proposed)</td><td>ok</td><td>0.1683</td>") == 1
    svg_text = page[page.index("<svg"): page.index("</svg>") + 6]
    circles = ET.fromstring(svg_text).findall("{http://www.w3.org/2000/svg}circle")
    assert len(circles) == 2 and {c.get("fill") for c in circles} == {"#1f77b4", "#d62728"}
    # The compute-bound matmul sits right of and above the memory-bound pointwise kernel.
    (mm,) = [c for c in circles if c.get("fill") == "#d62728"]
    (pwc,) = [c for c in circles if c.get("fill") == "#1f77b4"]
    assert float(mm.get("cx")) > float(pwc.get("cx")) and float(mm.get("cy")) < float(pwc.get("cy"))
    assert "No kernel profile" in results.html({"attempts": [], "best": None}, "t", "m")


def test_editor_settings_reach_the_job_command_line(tmp_path):
    """VS Code's keys (the extension's resolved section) become the optimize command's flags, and the
    command line parses: Nsight Compute and the Nsight Systems timeline can each be turned off."""
    from stitchcuda.cli import build_parser
    from stitchcuda.server.jobs import Job
    from stitchcuda.settings import Settings

    s, problems = Settings.from_config({"rounds": 2, "timeBudget": 60, "gpu": 1, "profile": False,
                                        "timeline": False, "interpreter": "/x/python",
                                        "llmEndpoint": "http://127.0.0.1:9/v1", "llmModel": "m"})
    assert problems == []
    assert (s.rounds, s.time_budget_s, s.gpu, s.profile, s.timeline) == (2, 60, 1, False, False)
    argv = Job.new(tmp_path / "m.py", "Block", s).argv()
    assert argv[1:4] == ["-m", "stitchcuda.cli", "optimize"]
    args = build_parser().parse_args(argv[3:])
    assert (args.rounds, args.budget, args.gpu, args.no_profile, args.no_timeline) == (2, 60.0, 1, True, True)
    assert (args.llm_endpoint, args.llm_model) == ("http://127.0.0.1:9/v1", "m")
    default = build_parser().parse_args(Job.new(tmp_path / "m.py", "Block", Settings()).argv()[3:])
    assert (default.no_profile, default.no_timeline) == (False, False)
    # Several GPUs: stitchcuda.gpus takes the place of stitchcuda.gpu (the CLI refuses both).
    s, problems = Settings.from_config({"gpu": 1, "gpus": "0, 1", "perRound": 3})
    assert problems == []
    args = build_parser().parse_args(Job.new(tmp_path / "m.py", "Block", s).argv()[3:])
    assert (args.gpu, args.gpus, args.per_round) == (None, "0, 1", 3)
    _, problems = Settings.from_config({"gpus": "first two", "perRound": 0})
    assert sorted(p.key for p in problems) == ["gpus", "perRound"]


def test_results_page_shows_where_the_reference_spends_its_time() -> None:
    """The live H100 job's recorded profile (the example's ops by share, with their lines), and a
    timeline's busy share where Nsight Systems ran."""
    from stitchcuda.server import results

    summary = json.loads((ROOT / "bench" / "results" / "2026-11-23-h100-example-gated_block-live-e2e.json").read_text())
    page = results.html(summary, "t", "m")
    assert "<tr><td>17%</td><td>151.9</td><td>aten::mul</td><td>(top)</td><td>19</td></tr>" in page
    assert "Measured on NVIDIA H100 80GB HBM3" in page and "Nsight Systems" not in page
    timeline = {"busy_share": 0.31, "kernels_per_forward": 42.0, "median_kernel_us": 3.25, "launch_bound": True}
    summary["plan"]["profile"]["nsys"] = {"timeline": timeline}
    assert "the GPU is busy 31% of each forward's span (launch-bound), 42 kernels per forward" in results.html(summary, "t", "m")
    assert "No reference profile" in results.html({"attempts": []}, "t", "m")


def test_results_page_draws_the_roofs_of_the_gpu_that_was_profiled() -> None:
    """The H200 run's finding carries the H200's peaks; this machine (no GPU, or another GPU) must not
    put its own roofs under that kernel. The page also gives the candidate's precision and the
    matched-precision column."""
    from stitchcuda.server import results

    rec = replay.load(ROOT / "bench" / "results" / "2026-11-25-h200-example-gated_block-32ba689.json")
    summary = {"best": rec["best"], "attempts": rec["attempts"]}
    page = results.html(summary, "t", "m")
    assert "roofs: NVIDIA H200, 4.22 TB/s DRAM" in page
    assert "<th>vs compile, same precision</th><th>precision</th>" in page and "<td>tf32</td>" in page
