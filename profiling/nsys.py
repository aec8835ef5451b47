"""The reference's GPU time from Nsight Systems, where `nsys` is installed.

The same ranking as profiling.reference (op, submodule, source line), but timed by CUPTI in an
`nsys profile` of a child process instead of by torch.profiler in ours, plus what only a timeline
shows: how much of each forward's GPU span the GPU is busy. A module of many small kernels leaves
the GPU idle between launches (launch-bound: the case for one CUDA graph over forward), which a sum
of kernel times cannot tell.

The child runs the reference as profiling.reference does (same seeds, no grad), with NVTX ranges
instead of profiler ranges: torch's `emit_nvtx` puts one around each aten op, hooks one around
each submodule call, a torch-function mode one around each call from the task's file (named by
its line), and one around each measured forward; only those forwards are captured
(`--capture-range=cudaProfilerApi`). The report is exported to SQLite and read with the standard
library: each kernel is joined to the runtime call that launched it (correlationId), and that call
to the innermost range open on its thread at that moment. The ranges become the same events
profiling.reference records, so one attribution rule serves both.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stitchcuda.types import Task

from . import cache
from .process import run_in_session
from .reference import (
    _LINE,
    _MODULE,
    RECORD_VERSION,
    ReferenceProfile,
    _statistic,
    device_name,
    from_dict,
    replay,
)

FORWARD = "stitchcuda.forward"  # an instrumented forward: its kernels are ranked
BARE = "stitchcuda.forward.bare"  # a forward without the op and line ranges: its timeline is measured
NVTX_PUSH_POP = 59  # NVTX_EVENTS.eventType of a push/pop range (NvtxPushPopRange)
LAUNCH_BOUND_BUSY = 0.5  # below this GPU-busy share of a forward's span, the notes say launch-bound
# Where Nsight Systems installs its CLI, newest first after PATH (the GPU machine here has it only in
# Nsight Compute's host folder).
_PLACES = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/local/cuda*/nsight-systems*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)


def find_nsys() -> str | None:
    """STITCHCUDA_NSYS, else `nsys` on PATH, else the newest in the usual install folders."""
    given = os.environ.get("STITCHCUDA_NSYS")
    if given:
        return given if os.access(given, os.X_OK) else None
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in _PLACES:
        hits = sorted((p for p in glob.glob(pattern) if os.access(p, os.X_OK)), key=_version_key, reverse=True)
        if hits:
            return hits[0]
    return None


def _version_key(path: str) -> tuple[tuple[int, ...], str]:
    """Newest first by the version in the path (2025.10 after 2025.9), then by name."""
    nums = next((tuple(int(x) for x in part.split(".")) for part in Path(path).parts
                 if part.replace(".", "").isdigit() and "." in part), ())
    return nums, path


def profile_in_subprocess(
    task: Task, *, timeout_s: float = 180.0, device: str | None = None, iterations: int = 5,
    keep: Path | None = None,
) -> ReferenceProfile:
    """Profile the reference under `nsys profile`; failures come back as a profile with a note,
    never raised. `keep`: a folder to keep the report and its SQLite export in. A timeline of the same
    file content on the same GPU and torch comes from the cache (profiling.cache) unless `keep` asks
    for the report."""
    nsys = find_nsys()
    if nsys is None:
        return _failed(task, device, "Nsight Systems (nsys) not found: no timeline profile")
    gpu = device_name(device)
    if keep is None and (hit := cache.load(task, "nsys", gpu, iterations)) is not None:
        return from_dict(hit)
    profile = _profile_in_subprocess(nsys, task, timeout_s=timeout_s, device=device, iterations=iterations,
                                     keep=keep)
    if keep is None:
        cache.save(task, "nsys", gpu, iterations, profile.to_dict())
    return profile


def _profile_in_subprocess(
    nsys: str, task: Task, *, timeout_s: float, device: str | None, iterations: int, keep: Path | None,
) -> ReferenceProfile:
    request = {"path": str(task.path), "class_name": task.class_name, "init_inputs_fn": task.init_inputs_fn,
               "inputs_fn": task.inputs_fn, "mode": task.mode, "device": device, "iterations": iterations}
    with contextlib.ExitStack() as stack:
        folder = keep if keep is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "request.json").write_text(json.dumps(request))
        report = folder / "reference"
        cmd = [nsys, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
               "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--force-overwrite=true",
               "-o", str(report), sys.executable, "-m", "stitchcuda.profiling.nsys", str(folder / "request.json")]
        deadline = time.monotonic() + timeout_s
        timed_out = _failed(task, device, f"nsys timed out after {timeout_s:.0f} s")
        try:
            run = run_in_session(cmd, timeout_s)
            if run is None:
                _drop_raw(folder)
                return timed_out
            rep = next(iter(sorted(folder.glob("reference.*rep"))), None)
            if rep is None:
                dropped = _drop_raw(folder)
                return _failed(task, device, f"nsys profile wrote no report (exit {run.returncode}): "
                                             f"{_no_report_why(run.stdout, run.stderr)}{dropped}")
            db = folder / "reference.sqlite"
            exported = run_in_session([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(db),
                                       str(rep)], deadline - time.monotonic())
            if exported is None:
                return timed_out
            if exported.returncode != 0 or not db.exists():
                return _failed(task, device, f"nsys export failed (exit {exported.returncode})")
        except OSError as e:
            return _failed(task, device, f"nsys could not be run: {e}")
        try:
            meta = json.loads((folder / "child.json").read_text())
        except (OSError, ValueError):
            meta = {}
        try:
            return read(db, str(Path(task.path).resolve()), iterations, task=task.name,
                        device=meta.get("device") or device or "?")
        except sqlite3.Error as e:
            return _failed(task, device, f"the nsys report could not be read: {e}")


def _failed(task: Task, device: str | None, why: str) -> ReferenceProfile:
    return ReferenceProfile(task.name, device or "?", "none", 0.0, [], [why])


IMPORTER_FIX = ("Nsight Systems' QDSTRM importer could not run, so the raw capture was not turned into a "
                "report; usually a shared library it loads is missing (e.g. elfutils' libdw: apt install libdw1)")


def _no_report_why(stdout: str, stderr: str) -> str:
    """nsys's own last line; where its importer failed (which nsys reports only as "Unable to
    retrieve the importer version"), what that means and what usually fixes it, before nsys's line."""
    lines = (stderr + "\n" + stdout).strip().splitlines()
    said = next((ln.strip() for ln in lines if "importer" in ln.lower()), None)
    if said is not None:
        return f"{IMPORTER_FIX}; nsys said: {said[:300]}"
    return ((stderr or stdout).strip().splitlines() or ["no output"])[-1][:300]


def _drop_raw(folder: Path) -> str:
    """Remove the raw captures (*.qdstrm) nsys left without importing them: they can be gigabytes.
    Says what went, for the note."""
    gone = 0
    for raw in folder.glob("*.qdstrm"):
        with contextlib.suppress(OSError):
            size = raw.stat().st_size
            raw.unlink()
            gone += size
    return f" (its raw capture, {gone / 1e6:.1f} MB of .qdstrm, was deleted)" if gone else ""


# ---------------------------------------------------------------------------------------------
# Reading the SQLite export


def read(db: Path, path: str, iterations: int, *, task: str = "", device: str = "?") -> ReferenceProfile:
    """The ranking and the timeline figures of an exported report; `path` is the task file as the
    child's line ranges name it."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        ranges = _ranges(con)
        kernels = _kernels(con)
    finally:
        con.close()
    record, forwards = to_record(ranges, kernels, path, iterations)
    profile = replay(record, task=task, device=device)
    profile.notes[0] = f"CUDA kernel time (Nsight Systems, CUPTI) per iteration, {_statistic(record['iterations'])} of {record['iterations']}"
    profile.timeline = timeline(forwards)
    if record["other_threads"]:
        profile.notes.append(f"{record['other_threads']} kernel(s) launched from threads without ranges "
                             "(a library's own threads): not ranked")
    if profile.timeline:
        t = profile.timeline
        bound = " (launch-bound: the GPU waits on launches)" if t["launch_bound"] else ""
        profile.notes.append(
            f"GPU busy {t['busy_share']:.0%} of each forward's GPU span{bound}: {t['kernels_per_forward']:.0f} "
            f"kernels per forward, median {t['median_kernel_us']:.1f} us, span {t['span_us']:.1f} us"
        )
    return profile


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _ranges(con: sqlite3.Connection) -> list[tuple[int, int, int, str]]:
    """(thread, start, end, name) of every push/pop range, names without torch's ", seq = ..." tails."""
    if "NVTX_EVENTS" not in _tables(con):
        return []
    rows = con.execute(
        "SELECT n.globalTid, n.start, n.end, COALESCE(n.text, s.value) FROM NVTX_EVENTS AS n "
        "LEFT JOIN StringIds AS s ON n.textId = s.id WHERE n.eventType = ? AND n.end IS NOT NULL",
        (NVTX_PUSH_POP,),
    )
    return [(tid, start, end, (name or "").split(", ", 1)[0]) for tid, start, end, name in rows if end >= start]


def _kernels(con: sqlite3.Connection) -> list[tuple[int, int, int, int, str]]:
    """(launching thread, launch time, start, end, name) of every kernel, memcpy and memset on the
    GPU (torch's contiguous copies are memcpys), each joined to the call that launched it in the same
    process (correlation ids are unique per process only)."""
    have = _tables(con)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in have:
        return []
    out: list[tuple[int, int, int, int, str]] = []
    for table, name in (("CUPTI_ACTIVITY_KIND_KERNEL", "COALESCE(s.value, '')"),
                        ("CUPTI_ACTIVITY_KIND_MEMCPY", "'[memcpy]'"), ("CUPTI_ACTIVITY_KIND_MEMSET", "'[memset]'")):
        if table not in have:
            continue
        cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        strings = "LEFT JOIN StringIds AS s ON k.shortName = s.id" if "shortName" in cols else ""
        same_process = " AND (r.globalTid >> 24) = (k.globalPid >> 24)" if "globalPid" in cols else ""
        out += [tuple(r) for r in con.execute(
            f"SELECT r.globalTid, r.start, k.start, k.end, {name if strings else repr(table)} FROM {table} AS k "
            f"JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId{same_process} {strings}"
        )]
    return out


def to_record(
    ranges: list[tuple[int, int, int, str]], kernels: list[tuple[int, int, int, int, str]], path: str, iterations: int
) -> tuple[dict[str, Any], list[list[tuple[int, int]]]]:
    """The ranges as profiling.reference's recorded events (parents by nesting on each thread), each
    kernel in an instrumented forward timed on the innermost range open at its launch; and the
    kernel intervals of each bare forward, for the timeline. Kernels launched outside every forward
    range are left out (warm-up, the profiler's own)."""
    rows: list[dict[str, Any]] = []
    per_thread: dict[int, list[int]] = {}
    for tid, start, end, name in sorted(ranges, key=lambda r: (r[0], r[1], -r[2])):
        stack = per_thread.setdefault(tid, [])
        while stack and rows[stack[-1]]["end"] <= start:
            stack.pop()
        rows.append({"tid": tid, "start": start, "end": end, "name": name,
                     "parent": stack[-1] if stack else None, "kernels_us": []})
        stack.append(len(rows) - 1)
    # Per thread, the ranges in start order, to find the innermost one open at a launch.
    order: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        order.setdefault(r["tid"], []).append(i)
    starts = {tid: [rows[i]["start"] for i in idx] for tid, idx in order.items()}
    forwards: dict[int, list[tuple[int, int]]] = {}  # bare forward range -> its kernels' intervals
    other_threads = 0
    for tid, launched, k_start, k_end, _name in kernels:
        if tid not in order:
            other_threads += 1  # a thread that opened no range: a library's own, say
            continue
        j = bisect_right(starts[tid], launched) - 1
        i = order[tid][j] if j >= 0 else None
        while i is not None and rows[i]["end"] < launched:
            i = rows[i]["parent"]
        if i is None:
            continue
        fwd = i
        while fwd is not None and rows[fwd]["name"] not in (FORWARD, BARE):
            fwd = rows[fwd]["parent"]
        if fwd is None:
            continue
        if rows[fwd]["name"] == BARE:
            forwards.setdefault(fwd, []).append((k_start, k_end))
            continue
        if "::" not in rows[i]["name"]:
            # Launched outside any aten op (a library's own kernel, a raw extension): time outside
            # the ranking, as profiling.reference counts it, on a child of the range it ran in.
            child = rows[i].get("outside")
            if child is None:
                child = rows[i]["outside"] = len(rows)
                rows.append({"tid": tid, "start": launched, "end": launched, "name": "(outside aten ops)",
                             "parent": i, "kernels_us": []})
            i = child
        rows[i]["kernels_us"].append((k_end - k_start) / 1000.0)
    index = {}
    events = []
    for i, r in enumerate(rows):
        index[i] = len(events)
        ranged = r["name"].startswith((_MODULE, _LINE)) or r["name"] in (FORWARD, BARE)
        events.append({"name": r["name"], "overload": "", "device": None, "async": False,
                       "annotation": ranged, "python": False, "self_cpu_us": (r["end"] - r["start"]) / 1000.0,
                       "kernels_us": r["kernels_us"], "stack": [],
                       "parent": index[r["parent"]] if r["parent"] is not None else None})
    # Per instrumented forward captured (the child may have been cut short), else as asked.
    iterations = sum(1 for r in rows if r["name"] == FORWARD) or max(1, iterations)
    record = {"version": RECORD_VERSION, "path": path, "clock": "cuda", "iterations": iterations,
              "other_threads": other_threads,
              "torch": "", "events": events}
    return record, [forwards[k] for k in sorted(forwards)]


def timeline(forwards: list[list[tuple[int, int]]]) -> dict[str, Any]:
    """Per forward: the span from its first kernel's start to its last kernel's end, and the share
    of it some kernel runs (overlaps on several streams count once); means over the forwards."""
    if not forwards:
        return {}
    spans, busy, counts, durations = [], [], [], []
    for ks in forwards:
        ks = sorted(ks)
        spans.append(max(e for _, e in ks) - ks[0][0])
        covered, cur_s, cur_e = 0, ks[0][0], ks[0][1]
        for s, e in ks[1:]:
            if s > cur_e:
                covered += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        busy.append(covered + cur_e - cur_s)
        counts.append(len(ks))
        durations += [e - s for s, e in ks]
    durations.sort()
    span = sum(spans) / len(spans)
    busy_share = sum(busy) / sum(spans) if sum(spans) > 0 else 1.0
    return {
        "forwards": len(forwards),
        "span_us": span / 1000.0,
        "busy_us": sum(busy) / len(busy) / 1000.0,
        "busy_share": busy_share,
        "kernels_per_forward": sum(counts) / len(counts),
        "median_kernel_us": durations[len(durations) // 2] / 1000.0,
        "launch_bound": busy_share < LAUNCH_BOUND_BUSY,
    }


# ---------------------------------------------------------------------------------------------
# The child, run under `nsys profile`


@contextlib.contextmanager
def _nvtx_range(name: str) -> Iterator[None]:
    import torch

    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def _child(request_path: Path) -> None:
    import torch

    from .reference import _LineRanges, _module_ranges, build_reference

    class _NvtxLines(_LineRanges):
        def range(self, name: str) -> contextlib.AbstractContextManager[Any]:
            return _nvtx_range(name)

    req = json.loads(request_path.read_text())
    task = Task(Path(req["path"]), req["class_name"], req["init_inputs_fn"], req["inputs_fn"],
                mode=req.get("mode", "as-built"))
    dev = torch.device(req.get("device") or "cuda:0")
    model, inputs = build_reference(task, dev)
    (request_path.parent / "child.json").write_text(json.dumps({"device": torch.cuda.get_device_name(dev)}))
    path = str(Path(task.path).resolve())
    with torch.no_grad():
        for _ in range(2):  # warm-up, not captured
            model(*inputs)
        torch.cuda.synchronize(dev)
        torch.cuda.profiler.start()
        n = max(1, int(req.get("iterations", 5)))
        with torch.autograd.profiler.emit_nvtx(), _module_ranges(model, _nvtx_range), _NvtxLines(path):
            for _ in range(n):
                with _nvtx_range(FORWARD):
                    model(*inputs)
                    torch.cuda.synchronize(dev)
        # The timeline from forwards without the per-op instrumentation, whose own cost on the CPU
        # would open gaps between small kernels that the module itself does not have.
        for _ in range(n):
            with _nvtx_range(BARE):
                model(*inputs)
                torch.cuda.synchronize(dev)
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
