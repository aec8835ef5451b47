"""Nsight Systems for the reference profile: reading an exported report and finding the tool.

The report here is built with the tables and columns of Nsight Systems' documented SQLite export
(StringIds, NVTX_EVENTS, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_KERNEL): no nsys runs on
this machine; the real tool's exports, recorded on the GPU machine, are read at the end."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from stitchcuda.profiling import nsys
from stitchcuda.types import Task

# The user file the synthetic capture names (never read: only matched against the capture's frames).
PATH = str(Path("ws", "block.py").absolute())
T, OTHER = 101, 202  # globalTid of the Python thread and of a library's own thread


def _export(db: Path, forwards: int = 2) -> None:
    con = sqlite3.connect(db)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT,
            category INT, color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT,
            globalTid INT, correlationId INT, nameId INT, returnValue INT, callchainId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT,
            contextId INT, streamId INT, correlationId INT, globalPid INT, demangledName INT, shortName INT,
            mangledName INT, launchType INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT,
            contextId INT, streamId INT, correlationId INT, globalPid INT, bytes INT, copyKind INT);
        """
    )
    names = {"sm90_gemm": 1, "relu_kernel": 2, "elementwise_kernel": 3, "warmup_kernel": 4}
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, n) for n, i in names.items()])
    con.execute("INSERT INTO StringIds VALUES (9, 'aten::relu, seq = 5, op_id = 12')")
    ranges, runtime, kernels, copies = [], [], [], []
    pid = 7 << 24

    def rng(start, end, text, tid=T, text_id=None):
        ranges.append((start, end, nsys.NVTX_PUSH_POP, None, None, None, text, pid | tid, pid | tid, text_id, 0))

    def launch(at, k_start, k_end, name, tid=T, other_process=False):
        corr = len(runtime) + 1
        runtime.append((at, at + 500, 0, pid | tid, corr, 0, 0, 0))
        owner = (8 << 24) if other_process else pid
        if name == "memcpy":
            copies.append((k_start, k_end, 0, 1, 7, corr, owner, 1 << 20, 8))
        else:
            kernels.append((k_start, k_end, 0, 1, 7, corr, owner, names[name], names[name], 0, 0))

    launch(-50_000, -40_000, -30_000, "warmup_kernel")  # before any forward range: not counted
    for k in range(forwards):
        b = 1_000_000 * k
        rng(b, b + 90_000, nsys.FORWARD)
        rng(b + 1_000, b + 80_000, "stitchcuda.module:")
        rng(b + 2_000, b + 40_000, "stitchcuda.line:19")
        rng(b + 3_000, b + 30_000, "stitchcuda.module:fc")
        rng(b + 4_000, b + 29_000, "aten::linear, seq = 3")
        rng(b + 4_100, b + 4_200, "aten::t")
        rng(b + 5_000, b + 28_000, "aten::addmm, seq = 4, op_id = 7")
        launch(b + 6_000, b + 10_000, b + 30_000, "sm90_gemm")  # 20 us, in addmm
        rng(b + 41_000, b + 60_000, "stitchcuda.line:20")
        rng(b + 42_000, b + 50_000, None, text_id=9)  # the name from StringIds
        launch(b + 43_000, b + 50_000, b + 55_000, "relu_kernel")  # 5 us, in relu
        launch(b + 70_000, b + 85_000, b + 87_000, "elementwise_kernel")  # 2 us, in no aten op
        launch(b + 44_000, b + 52_000, b + 53_000, "elementwise_kernel", tid=OTHER)  # no range open there
        rng(b + 61_000, b + 69_000, "aten::copy_, seq = 9")
        launch(b + 62_000, b + 80_000, b + 81_000, "memcpy")  # 1 us, a contiguous copy
        # Another process's kernel with the same correlation id as this forward's copy: not ours.
        kernels.append((b + 80_000, b + 99_000, 0, 1, 7, len(runtime), 8 << 24, 3, 3, 0, 0))
    for k in range(forwards):
        # The bare forwards (no op ranges): the timeline's, not the ranking's.
        b = 10_000_000 + 1_000_000 * k
        rng(b, b + 90_000, nsys.BARE)
        launch(b + 6_000, b + 10_000, b + 30_000, "sm90_gemm")
        launch(b + 43_000, b + 50_000, b + 55_000, "relu_kernel")
        launch(b + 70_000, b + 75_000, b + 77_000, "elementwise_kernel")
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)", ranges)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", runtime)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?)", kernels)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?)", copies)
    con.commit()
    con.close()


def test_kernels_are_ranked_by_the_op_module_and_line_that_launched_them(tmp_path):
    db = tmp_path / "reference.sqlite"
    _export(db)
    prof = nsys.read(db, PATH, iterations=2, task="block", device="NVIDIA H100 80GB HBM3")
    assert prof.clock == "cuda"
    got = [(o.op, o.module, o.line, round(o.time_us, 3), o.calls) for o in prof.ops]
    # aten::linear decomposes: its kernel counts for addmm, as in the traced graph (its transpose
    # launches nothing and ranks last, as with torch.profiler).
    # The copy is a memcpy, not a kernel, and still the copy_ op's time.
    assert got == [("aten::addmm", "fc", 19, 20.0, 1), ("aten::relu", "", 20, 5.0, 1),
                   ("aten::copy_", "", 0, 1.0, 1), ("aten::t", "fc", 19, 0.0, 1)]
    assert prof.total_us == pytest.approx(26.0)
    assert prof.ops[0].share == pytest.approx(20 / 26)
    assert prof.notes[0].startswith("CUDA kernel time (Nsight Systems, CUPTI) per iteration, mean of 2")
    assert any("2.0 us per iteration outside any op" in n for n in prof.notes), prof.notes
    assert any(n.startswith("2 kernel(s) launched from threads without ranges") for n in prof.notes), prof.notes


def test_the_timeline_says_how_busy_the_gpu_is_within_each_forward(tmp_path):
    db = tmp_path / "reference.sqlite"
    _export(db)
    t = nsys.read(db, PATH, iterations=2).timeline
    # Bare forwards' kernels at 10-30, 50-55 and 75-77 us: a 67 us span, 27 us of it busy (the
    # instrumented forwards, with a copy and a later kernel, do not count here).
    assert t["forwards"] == 2 and t["kernels_per_forward"] == 3
    assert t["span_us"] == pytest.approx(67.0) and t["busy_us"] == pytest.approx(27.0)
    assert t["busy_share"] == pytest.approx(27 / 67)
    assert t["median_kernel_us"] == pytest.approx(5.0)
    notes = nsys.read(db, PATH, iterations=2).notes
    assert any(n.startswith("GPU busy 40% of each forward's GPU span (launch-bound") for n in notes), notes


def test_overlapping_kernels_count_once():
    busy = nsys.timeline([[(0, 10_000), (5_000, 20_000), (30_000, 40_000)]])
    assert busy["busy_us"] == pytest.approx(30.0) and busy["span_us"] == pytest.approx(40.0)
    assert nsys.timeline([]) == {}


def test_iterations_follow_the_forwards_captured(tmp_path):
    db = tmp_path / "reference.sqlite"
    _export(db, forwards=1)  # asked for 5, the child was cut short after one
    prof = nsys.read(db, PATH, iterations=5)
    assert prof.ops[0].time_us == pytest.approx(20.0)


def test_a_report_without_cuda_tables_ranks_nothing(tmp_path):
    db = tmp_path / "empty.sqlite"
    sqlite3.connect(db).close()
    prof = nsys.read(db, PATH, iterations=3)
    assert prof.ops == [] and prof.timeline == {} and "no op time was recorded" in prof.notes


def _tool(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nsys"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


def test_find_nsys_where_it_is_installed(tmp_path, monkeypatch):
    monkeypatch.delenv("STITCHCUDA_NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(nsys, "_PLACES", (str(tmp_path / "opt/nsight-compute/*/host/target-linux-x64/nsys"),))
    assert nsys.find_nsys() is None
    older = _tool(tmp_path / "opt/nsight-compute/2025.1.0/host/target-linux-x64")
    newer = _tool(tmp_path / "opt/nsight-compute/2025.3.1/host/target-linux-x64")
    assert nsys.find_nsys() == str(newer) and older.exists()
    on_path = _tool(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert nsys.find_nsys() == str(on_path)
    monkeypatch.setenv("STITCHCUDA_NSYS", str(older))
    assert nsys.find_nsys() == str(older)


def test_without_nsys_the_profile_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(nsys, "find_nsys", lambda: None)
    task = Task(path=tmp_path / "m.py")
    prof = nsys.profile_in_subprocess(task, device="cuda:0")
    assert prof.clock == "none" and prof.ops == [] and "nsys) not found" in prof.notes[0]


def test_a_failing_nsys_is_a_note_not_a_crash(tmp_path, monkeypatch):
    """A tool that exits without writing a report (no permission to trace, say)."""
    exe = tmp_path / "nsys"
    exe.write_text("#!/bin/sh\necho 'ERROR: cannot trace' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("STITCHCUDA_NSYS", str(exe))
    prof = nsys.profile_in_subprocess(Task(path=tmp_path / "m.py"), keep=tmp_path / "kept")
    assert prof.clock == "none" and "wrote no report (exit 1): ERROR: cannot trace" in prof.notes[0]
    assert os.path.exists(tmp_path / "kept" / "request.json")


# What the GPU machine's nsys (the copy in Nsight Compute's folder) did where its QdstrmImporter could
# not load libdw.so.1: the capture written as a raw .qdstrm, the importer line, no report. The lines
# around nsys's own are of the same shape, not copied from it.
_NSYS_NO_IMPORTER = """#!/bin/sh
prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
head -c 3000000 /dev/zero > "$out.qdstrm"
echo "Collecting data..."
echo "Unable to retrieve the importer version: skipping importation of the QDSTRM file."
echo "Generated:"
echo "    $out.qdstrm"
exit 0
"""


def test_an_importer_that_cannot_run_is_named_and_its_raw_capture_removed(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "nsys"
    exe.write_text(_NSYS_NO_IMPORTER)
    exe.chmod(0o755)
    monkeypatch.setenv("STITCHCUDA_NSYS", str(exe))
    kept = tmp_path / "kept"
    prof = nsys.profile_in_subprocess(Task(path=tmp_path / "m.py"), keep=kept)
    (note,) = prof.notes
    assert prof.clock == "none" and note.startswith("nsys profile wrote no report (exit 0): ")
    assert "QDSTRM importer could not run" in note and "apt install libdw1" in note
    assert "nsys said: Unable to retrieve the importer version: skipping importation of the QDSTRM file." in note
    assert "3.0 MB of .qdstrm, was deleted" in note
    assert (kept / "request.json").exists() and not list(kept.glob("*.qdstrm"))


MLP = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 4096)

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y)


def get_inputs():
    return [torch.randn(2048, 1024)]


def get_init_inputs():
    return []
"""


@pytest.mark.gpu
def test_nsys_profiles_the_reference_for_real(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if nsys.find_nsys() is None:
        pytest.skip("Nsight Systems (nsys) is not installed here")
    src = tmp_path / "mlp.py"
    src.write_text(MLP)
    prof = nsys.profile_in_subprocess(Task(path=src), device="cuda:0", iterations=3, keep=tmp_path / "nsys")
    assert prof.clock == "cuda", prof.notes
    top = prof.ops[0]
    assert (top.op, top.module, top.line) == ("aten::addmm", "fc", 11), prof.ops
    assert any(o.op == "aten::relu" and o.line == 12 for o in prof.ops)
    assert prof.timeline["forwards"] == 3 and 0 < prof.timeline["busy_share"] <= 1
    assert (tmp_path / "nsys" / "reference.sqlite").exists()


def test_a_hanging_profile_is_killed_with_its_child(tmp_path, monkeypatch):
    """nsys runs the reference as its own child: on timeout both go, not nsys alone."""
    import time

    exe = tmp_path / "nsys"
    exe.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {tmp_path / 'child.pid'}\nwait\n")
    exe.chmod(0o755)
    monkeypatch.setenv("STITCHCUDA_NSYS", str(exe))
    t0 = time.monotonic()
    prof = nsys.profile_in_subprocess(Task(path=tmp_path / "m.py"), timeout_s=2.0)
    assert prof.clock == "none" and "timed out after 2 s" in prof.notes[0]
    assert time.monotonic() - t0 < 30
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the profiled child {child} outlived the timeout")


def test_newest_version_first_by_number():
    paths = ["/opt/nvidia/nsight-systems/2025.9.1/bin/nsys", "/opt/nvidia/nsight-systems/2025.10.0/bin/nsys"]
    assert sorted(paths, key=nsys._version_key, reverse=True)[0].endswith("2025.10.0/bin/nsys")


REC = Path(__file__).parent / "fixtures" / "recorded" / "h100-profiles"


@pytest.mark.parametrize(("problem", "top", "module", "line"), [
    ("1_MLP", "aten::addmm", "network.0", 31),
    ("5_AlexNet", "aten::convolution", "conv1", 51),
])
def test_a_real_export_reads_as_the_gpu_machine_read_it(problem, top, module, line):
    """Nsight Systems' own SQLite export of a KernelBench reference (recorded on the H100 by
    scripts/record_profiles.py), read here with no nsys: the same ranking and timeline as the GPU
    machine's reading in the same run, and the same order of the top ops as torch.profiler's."""
    recorded = json.loads((REC / "nsys" / problem / "profile.json").read_text())
    path = recorded["ops"][0]["file"]  # as the recording machine named the task file
    prof = nsys.read(REC / "nsys" / problem / "reference.sqlite", path, 3)
    # The GPU machine's reading took each op's mean over the forwards; the reading now takes the
    # median (one preempted forward no longer reorders the ranking), within 2% on these recordings.
    assert prof.clock == "cuda" and prof.notes[1:] == recorded["notes"][1:]
    assert prof.notes[0] == recorded["notes"][0].replace("mean of 3", "median of 3")
    assert [(o.op, o.module, o.line, o.calls) for o in prof.ops] == \
        [(o["op"], o["module"], o["line"], o["calls"]) for o in recorded["ops"]]
    assert [o.time_us for o in prof.ops] == pytest.approx([o["time_us"] for o in recorded["ops"]], rel=0.02)
    assert (prof.ops[0].op, prof.ops[0].module, prof.ops[0].line) == (top, module, line)
    assert prof.timeline["forwards"] == 3 and prof.timeline["busy_share"] > 0.9
    assert sum(o.share for o in prof.ops) == pytest.approx(1.0)
    # torch.profiler on the same problem (recorded in an earlier run) ranks the same top three.
    torch_prof = json.loads((REC / "reference" / f"{problem}.profile.json").read_text())
    assert [(o["op"], o["module"]) for o in torch_prof["ops"][:3]] == [(o.op, o.module) for o in prof.ops[:3]]
