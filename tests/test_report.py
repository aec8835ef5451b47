"""The worker's report to the Verifier (agents/verify/report.py): signed, numbered records on a pipe,
and what a record once said stands. Real pipes, real workers; the candidates are tests/hacks/'s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import hack_candidate, hack_task, reported

from stitchcuda.agents.verify import blind, report
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Finding, Timing, Verdict

HACKS = Path(__file__).parent / "hacks"


def _timed(ms: float = 1.0) -> Verdict:
    return Verdict("c", "ok", built=True, correct=True, eager=Timing(2.0, 1.9, 2.1, 50), ours=Timing(ms, ms, ms, 50))


def _read(lines: list[bytes], key: bytes) -> report.Reader:
    """A Reader of these raw lines, written into a real pipe."""
    read_end, write_end = report.open_pipe()
    reader = report.Reader(read_end, key).start()
    for line in lines:
        os.write(write_end, line)
    os.close(write_end)
    reader.close()
    return reader


def _signed(key: bytes, seq: int, phase: str, v: Verdict) -> bytes:
    text = json.dumps({"seq": seq, "kind": "verdict", "phase": phase, "verdict": report.plain(v)}).encode()
    return report.sign(key, text).encode() + b"\t" + text + b"\n"


def test_the_worker_s_records_read_back_as_its_verdict():
    v = _timed()
    v.phases["timing"] = 1.5
    got, last = reported((v, "timing"), (v, report.FINAL)).merged("c")
    assert last == report.FINAL and got.status == "ok" and got.accepted
    assert got.ours == v.ours and got.phases == {"timing": 1.5}


@pytest.mark.parametrize("how", ["unsigned", "other-key", "out-of-sequence", "after-the-last", "not-json"])
def test_a_record_the_worker_did_not_write_makes_the_verdict_hacked(how):
    key = report.new_key()
    good = _timed(1.0)
    forged = _timed(1e-6)
    lines = [_signed(key, 1, "timing", good)]
    if how == "unsigned":
        text = json.dumps({"seq": 2, "kind": "verdict", "phase": "done", "verdict": report.plain(forged)}).encode()
        lines.append(b"0" * 64 + b"\t" + text + b"\n")
    elif how == "other-key":
        lines.append(_signed(report.new_key(), 2, "done", forged))
    elif how == "out-of-sequence":
        lines += [_signed(key, 3, "done", forged), _signed(key, 2, "done", good)]
    elif how == "after-the-last":
        lines += [_signed(key, 2, "done", good), _signed(key, 3, "done", forged)]
    else:
        text = b"{not json"
        lines.append(report.sign(key, text).encode() + b"\t" + text + b"\n")
    got, _ = _read(lines, key).merged("c")
    assert got.status == "hacked" and not got.accepted
    (f,) = [f for f in got.hack_findings if f.code == report.FORGED]
    assert f.data["problems"]
    assert got.ours.median_ms == 1.0  # the forged figure never replaced the worker's


def test_what_a_record_said_cannot_be_taken_back():
    """A finding dropped, a status of 'hacked' undone, a timing changed by a later record."""
    found = Verdict("c", "hacked", built=True, correct=False, ours=Timing(1.0, 1.0, 1.0, 50),
                    hack_findings=[Finding("torch-compute-in-forward", "aten::relu in forward")])
    clean = _timed(1.0)
    got, _ = reported((found, "timing"), (clean, report.FINAL)).merged("c")
    assert got.status == "hacked" and "torch-compute-in-forward" in {f.code for f in got.hack_findings}
    got, _ = reported((_timed(1.0), "timing"), (_timed(0.5), report.FINAL)).merged("c")
    assert got.status == "hacked" and any("ours changed" in p for f in got.hack_findings
                                          for p in f.data.get("problems", []))


def test_a_verdict_whose_class_or_lists_were_replaced_is_seen():
    class Sticky(Verdict):
        pass

    class Deaf(list):
        def append(self, item):
            pass

    v = Sticky("c", "ok", built=True, correct=True)
    v.hack_findings = Deaf()
    got, _ = reported((v, report.FINAL)).merged("c")
    assert got.status == "hacked" and report.FORGED in {f.code for f in got.hack_findings}


def test_a_last_record_cut_short_is_a_killed_worker_not_a_forgery():
    key = report.new_key()
    whole = _signed(key, 1, "timing", _timed())
    reader = _read([whole, _signed(key, 2, "done", _timed())[:40]], key)
    got, last = reader.merged("c")
    assert reader.cut_short and last == "timing" and got.status == "ok"


def test_the_records_go_through_functions_bound_before_the_candidate():
    """The hack's rebinding of dataclasses.asdict and json.dumps is real: in a process that imported
    it, Verdict.to_dict() says what the candidate wants. What the report sends is unchanged."""
    code = (f"import sys; sys.path.insert(0, {str(HACKS)!r})\n"
            "from stitchcuda.agents.verify import report\n"
            "from stitchcuda.types import Verdict, Finding, Timing\n"
            "import hack_forge_report_asdict\n"
            "v = Verdict('c', 'hacked', correct=False, ours=Timing(1.0, 1.0, 1.0, 50), "
            "hack_findings=[Finding('x', 'y')])\n"
            "import json\n"
            "print(json.dumps([v.to_dict()['status'], report.plain(v)['status'], report.plain(v)['ours']['median_ms']]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["ok", "hacked", 1.0]


@pytest.fixture()
def blind_off(build_cache, monkeypatch):
    """The worker alone: the blind check would reject these candidates by their outputs or ops."""
    monkeypatch.setenv(blind.BLIND_ENV, "0")
    return VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                         time_compile=False)


@pytest.mark.parametrize(("ref", "stem", "code"), [
    # PyTorch's work, with the functions the worker's old report went through rebound to clean it.
    ("ref_affine", "hack_forge_report_asdict", "torch-compute-in-forward"),
    # A forged final record written into every pipe the worker holds: it finds them by listing
    # /proc/self/fd, which is now refused (environment-probe) before any record is written.
    ("ref_affine", "hack_forge_report_pipe", "environment-probe"),
    # The same records written natively into every descriptor from 1 to 255, tried unlisted: they
    # reach the report pipe, unsigned.
    ("ref_affine", "hack_forge_report_fds", "report-forged"),
    # The worker's reference instance and verdict reached through frames or the collector's lists
    # (the blind check rejected these by their outputs; the worker now refuses the reach itself).
    ("ref_linear", "hack_rebind_reference_frames", "sandbox-introspect"),
    ("ref_linear", "hack_reference_via_gc_alias", "sandbox-introspect"),
    ("ref_affine", "hack_blind_the_verdict", "sandbox-introspect"),
])
def test_the_worker_alone_rejects_a_candidate_that_forges_its_report(tmp_path, blind_off, ref, stem, code):
    extra = {"forge_kernels.cpp": (HACKS / "forge_kernels.cpp").read_text()} if stem == "hack_forge_report_fds" else {}
    v = verify(hack_task(ref), hack_candidate(stem, **extra), tmp_path, blind_off)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message, v.log_tail[-1500:])
    assert code in {f.code for f in v.hack_findings}, [(f.code, f.message) for f in v.hack_findings]


def test_rebinding_what_a_verdict_was_saved_through_is_a_hack(tmp_path, build_cache):
    """A correct kernel, with dataclasses.asdict and json.dumps rebound to report a nanosecond: the
    attempt is named (timing-tamper), whatever its effect."""
    v = verify(hack_task("ref_affine"), hack_candidate("hack_forge_report_timing"), tmp_path,
               VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=180.0,
                             time_compile=False))
    assert v.status == "hacked" and v.correct, (v.status, v.message, v.log_tail[-1500:])
    (f,) = [f for f in v.hack_findings if f.code == "timing-tamper"]
    assert {"dataclasses.asdict", "json.dumps"} <= set(f.data["names"])


@pytest.mark.gpu
def test_a_forged_timing_never_reaches_the_verdict(tmp_path, build_cache):
    """On a GPU the worker times the candidate (a correct kernel), which rebinds asdict and json.dumps
    only once it is being timed: the figure they would write (a nanosecond) is not the one the
    Verifier reads, and the attempt is named after timing."""
    opts = VerifyOptions(timeout_s=300, trials=10, time_compile=False, extra_env={"STITCHCUDA_CACHE": str(build_cache)},
                         call_counts=False)  # it counts its calls to forge the timed ones
    v = verify(hack_task("ref_affine"), hack_candidate("gpu_hack_forge_report_timing", "kernels.cu"), tmp_path, opts)
    assert v.status == "hacked" and "timing-tamper" in {f.code for f in v.hack_findings}, (v.status, v.message)
    assert v.ours is not None and v.ours.median_ms > 1e-3, v.ours
