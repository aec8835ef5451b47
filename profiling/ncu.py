"""Nsight Compute for a candidate: the command, its raw page, and findings the Coder can act on.

`command` profiles only the candidate's own kernels (a regex of the __global__ names in its .cu),
with `--clock-control none` so clocks are the ones the timings ran at. `parse_csv` reads
`ncu --csv --page raw` (one row per launch, a units row under the header; the same page of an
exported report, through `ncu --import`) and also the details page layout (one row per metric);
values come back in SI base units, the median over launches. `findings` turns each kernel's
roofline classification into a `Finding` placed on its source line, judged against the peaks of the
device the kernels ran on (`device_target`: Nsight Compute's device attributes of the same page),
which each finding records (data["peaks"]).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from glob import glob
from pathlib import Path

from stitchcuda.python_argv import module_argv
from stitchcuda.target import Target
from stitchcuda.types import Finding

from . import ncu_rules, roofline
from .process import run_in_session
from .source_map import SourceMap, base_name

_NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
# Columns of the raw page that describe the launch rather than measure it.
_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream"}
_ID_COLUMNS |= {"Block Size", "Grid Size", "Device", "CC", "Section Name", "Function Name", "Demangled Name"}
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3}
_TIME |= {"second": 1.0, "s": 1.0}
NO_NCU = "ncu (Nsight Compute CLI) is not installed or not on PATH: no profile findings"
DEFAULT_TIMEOUT_S = 30.0  # the budget for profiling one candidate
# Each profiled launch costs about 0.5 s of replays (H100, roofline metrics): with ncu's start-up,
# a dozen launches is what fits the 30 s budget.
MAX_LAUNCHES = 12
MAX_KERNELS = 6  # where the Verifier timed the kernels: the hottest, up to this many...
HOT_SHARE = 0.95  # ...until they hold this share of the candidate's own kernel time
IMPORT_S = 3.0  # of the time limit, kept for reading the report's raw page back (ncu --import)
# Severity by the share of the profiled time a perfect kernel would save.
WARN_SHARE = 0.10


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in _NCU_PLACES:
        hits = sorted(glob(pattern))
        if hits:
            return hits[-1]
    return None


def kernel_names(files: Mapping[str, str]) -> list[str]:
    """__global__ function names by pattern, for where tree-sitter is missing."""
    names: list[str] = []
    for fname, text in files.items():
        if fname.endswith((".cu", ".cuh")):
            text = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", text)
            names += re.findall(r"__global__\s+[\w\s:<>,*&]*?(\w+)\s*\(", text)
    return sorted(set(names))


def kernel_regex(names: Sequence[str]) -> str:
    """`--kernel-name` value matching exactly these functions, with or without template arguments."""
    return "regex:^(" + "|".join(re.escape(n) for n in sorted(set(names))) + ")(<.*>)?$"


def command(
    target: Sequence[str],
    kernels: Sequence[str],
    *,
    launch_count: int = 0,
    metrics: Sequence[str] = roofline.METRICS,
    section_set: str | None = None,
    report: Path | None = None,
    ncu: str = "ncu",
) -> list[str]:
    """argv to profile `target` (e.g. [python, script.py]); CSV to stdout unless `report` is given.

    launch_count 0 means every matching launch; pass repeats * len(kernels) to bound the run.
    """
    argv = [ncu, "--clock-control", "none", "--target-processes", "all"]
    if kernels:
        argv += ["--kernel-name-base", "function", "--kernel-name", kernel_regex(kernels)]
    if launch_count:
        # Ended there: under ncu the rest of a forward can cost more than the profiled launches (a
        # MobileNet candidate on the H100: 15 s of cuDNN's first calls after its last profiled one).
        argv += ["--launch-count", str(launch_count), "--kill", "yes"]
    if section_set:
        argv += ["--set", section_set]
    if metrics:
        argv += ["--metrics", ",".join(metrics)]
    if report is not None:
        argv += ["--export", str(report), "--force-overwrite"]
    else:
        argv += ["--csv", "--page", "raw", "--print-units", "base"]
    return argv + list(target)


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text in {"n/a", "N/A"}:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _scale(unit: str) -> float:
    """Factor to SI base units: bytes, seconds, bytes/second, hertz; 1 for %, counts, unknowns."""
    unit = unit.strip()
    if "/" in unit:
        num, den = unit.split("/", 1)
        return _scale(num) / (_TIME.get(den.strip(), 1.0))
    if unit in _TIME:
        return _TIME[unit]
    m = re.fullmatch(r"([KMGTP]?)(byte|hz|cycle|inst|warp|sector|request)", unit)
    return _PREFIX[m.group(1)] if m else 1.0


def _rows(text: str) -> list[list[str]]:
    # ncu interleaves `==PROF==` lines and the program's own output with the CSV.
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_csv(text: str) -> dict[str, dict[str, float]]:
    """Kernel name (as NCU printed it) -> metric -> median over its launches, in SI base units.

    Each dict also carries "launches". Non-numeric metrics (names, sizes as tuples) are dropped.
    """
    rows = _rows(text)
    if not rows or "Kernel Name" not in rows[0]:
        return {}
    head = rows[0]
    samples: dict[str, dict[str, list[float]]] = {}
    launches: dict[str, set[str]] = {}
    col = {name: i for i, name in enumerate(head)}
    kname, kid = col["Kernel Name"], col.get("ID")

    def add(kernel: str, launch: str, metric: str, value: float) -> None:
        samples.setdefault(kernel, {}).setdefault(metric, []).append(value)
        launches.setdefault(kernel, set()).add(launch)

    if "Metric Name" in col:  # details page: one row per metric
        mn, mu, mv = col["Metric Name"], col.get("Metric Unit"), col["Metric Value"]
        for r in rows[1:]:
            if len(r) != len(head) or not r[mn]:
                continue
            v = _number(r[mv])
            if v is not None:
                unit = r[mu] if mu is not None else ""
                add(r[kname], r[kid] if kid is not None else "", r[mn], v * _scale(unit))
    else:  # raw page: one row per launch, the first row under the header gives units
        body = rows[1:]
        units = [""] * len(head)
        if body and not body[0][kname]:
            units, body = body[0], body[1:]
        for row, r in enumerate(body):
            if len(r) != len(head):
                continue
            launch = r[kid] if kid is not None else str(row)
            for i, name in enumerate(head):
                if name in _ID_COLUMNS:
                    continue
                v = _number(r[i])
                if v is not None:
                    add(r[kname], launch, name, v * _scale(units[i]))
    out: dict[str, dict[str, float]] = {}
    for kernel, metrics in samples.items():
        out[kernel] = {k: statistics.median(v) for k, v in metrics.items()}
        out[kernel]["launches"] = float(len(launches[kernel]))
    return out


_DEVICE_NAME = "device__attribute_display_name"


def device_target(text: str) -> Target | None:
    """The Target of the device the first profiled launch ran on, from the raw page's
    device__attribute_* columns (Nsight Compute records them with every launch); None where the
    page has none."""
    rows = _rows(text)
    if not rows or "Kernel Name" not in rows[0]:
        return None
    head = rows[0]
    col = {name: i for i, name in enumerate(head)}
    body = [r for r in rows[1:] if len(r) == len(head) and r[col["Kernel Name"]]]
    if not body:
        return None
    first = body[0]
    attrs = {name: v for name, i in col.items() if name.startswith("device__attribute_")
             and (v := _number(first[i])) is not None}
    name = first[col[_DEVICE_NAME]].strip() if _DEVICE_NAME in col else None
    return Target.from_ncu(attrs, name or None)


def _profiled_device(env: Mapping[str, str] | None) -> Target:
    """Where the page has no device attributes: the device the profiled child was pinned to
    (CUDA_VISIBLE_DEVICES in its environment, read in this process's numbering where that is the
    physical one), else this process's target."""
    pinned = (env or {}).get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if pinned.isdigit() and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        try:
            return Target.of_device(int(pinned))
        except Exception:  # noqa: BLE001 - no device to ask here: the fallback below says so
            pass
    return Target.current()


@dataclass
class CandidateProfile:
    findings: list[Finding]
    notes: list[str]
    seconds: float
    csv: str = ""  # the raw page of the run's report, kept beside the verdict


def hot_kernels(names: Sequence[str], kernel_us: Mapping[str, float] | None) -> tuple[list[str], str]:
    """The candidate's kernels to profile, hottest first, and a note where some are left out.

    `kernel_us`: GPU time per kernel in one forward (the Verifier's timeline; library kernels too).
    A candidate of one kernel per layer (MobileNet: 149) cannot be profiled whole in the budget: the
    kernels that hold most of the candidate's own GPU time come first. Without times, or where none
    of the timed kernels is the candidate's, every kernel is named, as before."""
    own: dict[str, float] = {}
    for full, us in (kernel_us or {}).items():
        name = base_name(full)
        if name in names:
            own[name] = own.get(name, 0.0) + us
    if not own:
        return sorted(set(names)), ""
    total = sum(own.values()) or 1.0
    chosen: list[str] = []
    covered = 0.0
    for name, us in sorted(own.items(), key=lambda kv: -kv[1]):
        if len(chosen) == MAX_KERNELS or (chosen and covered >= HOT_SHARE * total):
            break
        chosen.append(name)
        covered += us
    if len(chosen) == len(own):
        return chosen, ""
    return chosen, (f"profiled the {len(chosen)} kernels with the most GPU time of the {len(own)} the candidate "
                    f"launched ({covered / total:.0%} of their time)")


def report_csv(report: Path, *, ncu: str, timeout_s: float) -> str:
    """The raw page of a report (`ncu --import`: no GPU, no replays), as parse_csv reads it; "" where
    ncu cannot read it in time."""
    if not report.exists() or timeout_s < 0.5:
        return ""
    res = run_in_session([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"], timeout_s)
    return res.stdout if res is not None and res.returncode == 0 else ""


def _fresh_report(keep: Path) -> Path:
    """The report file ncu writes for `--export keep` (it adds ".ncu-rep" where the name lacks it),
    with any earlier one removed: a report from an earlier run, left where this one wrote none,
    would pass for this one's."""
    report = keep if keep.name.endswith(".ncu-rep") else keep.with_name(keep.name + ".ncu-rep")
    report.unlink(missing_ok=True)
    return report


def profile_candidate(
    request: Path,
    files: Mapping[str, str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    repeats: int = 2,
    peaks: roofline.Peaks | None = None,
    target: Target | None = None,
    keep_report: Path | None = None,
    kernel_us: Mapping[str, float] | None = None,
    kernel_launches: Mapping[str, int] | None = None,
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> CandidateProfile:
    """Nsight Compute over a candidate's own kernels (the __global__ functions of its .cu files, the
    hottest first where `kernel_us` says which, their launches in one forward where `kernel_launches`
    counts them), run in a child process on the Verifier's request; every failure becomes a note.

    One profiling run collects the roofline counters and the `basic` sections (Speed-of-Light, launch
    statistics, occupancy: the ones whose rules need no extra replays) into one report; its raw page
    gives the metrics, and ncu_rules reads NCU's rule results from it. ncu's start-up is most of the
    cost (about 12 s over the bare run for a cuDNN candidate on the H100), so a second run would
    spend the budget twice. `keep_report`: where to leave the report, for Nsight Compute's UI.
    The roofline uses `peaks` where given, else those of `target`, else those of the device the page
    says the kernels ran on. `wrap`: the sandbox the profiled process runs in (the Verifier's
    sandbox.Box.wrap): it runs the candidate's code, as the worker does."""
    t0 = time.monotonic()
    # Whatever happens below, a report left there belongs to this profile and no earlier one.
    kept = _fresh_report(keep_report) if keep_report is not None else None
    smap: SourceMap | None
    try:
        smap = SourceMap.from_files(files)
        names = [f.name for f in smap.kernels()]
    except ImportError:  # no tree-sitter: profile anyway, findings without source ranges
        smap, names = None, kernel_names(files)
    if not names:
        return CandidateProfile([], ["no __global__ kernels in the candidate's sources: nothing to profile"], 0.0)
    tool = find_ncu()
    if tool is None:
        return CandidateProfile([], [NO_NCU], 0.0)
    chosen, hot_note = hot_kernels(names, kernel_us)
    child = module_argv("stitchcuda.profiling.ncu_target", str(request), str(repeats))
    # Bounded: a model that launches one kernel per layer would otherwise replay every layer. Where
    # the Verifier counted them, the chosen kernels' launches in one forward, and ncu stops there.
    per_forward = sum(n for full, n in (kernel_launches or {}).items() if base_name(full) in chosen)
    count = min(per_forward or repeats * len(chosen), MAX_LAUNCHES)
    with contextlib.ExitStack() as stack:
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            report = kept
        else:
            report = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="stitchcuda-ncu-"))) / "profile.ncu-rep"
        res, text, metrics = None, "", {}
        # With the launch-statistics extras first; a machine whose ncu lacks one of them gets the
        # core set on a second try, within the same time limit.
        for metric_set in (roofline.METRICS + roofline.LAUNCH_EXTRAS, roofline.METRICS):
            left = timeout_s - (time.monotonic() - t0)
            if res is not None and left < 5:
                break
            report.unlink(missing_ok=True)
            argv = command(child, chosen, ncu=tool, launch_count=count, metrics=metric_set,
                           section_set=ncu_rules.SECTION_SET, report=report)
            res = run_in_session(wrap(argv) if wrap is not None else argv, left - IMPORT_S, env)
            if res is None:
                report.unlink(missing_ok=True)
                return CandidateProfile([], [f"ncu ran past {timeout_s:.0f} s: no profile findings"], time.monotonic() - t0)
            if "ERR_NVGPUCTRPERM" in res.stdout + res.stderr:
                break
            text = report_csv(report, ncu=tool, timeout_s=timeout_s - (time.monotonic() - t0))
            metrics = parse_csv(text)
            if metrics:
                break
        if not metrics:
            report.unlink(missing_ok=True)
            out = res.stdout + res.stderr
            if "ERR_NVGPUCTRPERM" in out:
                why = "no permission to read GPU performance counters (ERR_NVGPUCTRPERM)"
            else:
                why = f"ncu exit {res.returncode}, no kernel rows: " + " | ".join(out.strip().splitlines()[-3:])
            return CandidateProfile([], [why + "; timing-only verdict"], time.monotonic() - t0, res.stdout)
        device = target or device_target(text) or _profiled_device(env)
        found = findings(metrics, smap, peaks, target=device)
        left = timeout_s - (time.monotonic() - t0)
        if left >= 1.0:
            rules, why = ncu_rules.read_rules(report, tool, left)
        else:
            rules, why = {}, f"not read: the {timeout_s:.0f} s limit was spent"
    for f in found:
        mine = rules.get(base_name(f.kernel or ""), [])
        if mine:
            f.data["ncu_rules"] = mine[:5]
            f.message = f"{f.message} {ncu_rules.summary(mine[0])}"
    seconds = time.monotonic() - t0
    notes = [f"Nsight Compute: {len(metrics)} kernel(s), {seconds:.1f} s"] + ([hot_note] if hot_note else [])
    if found:
        roofs = roofline.Peaks.from_dict(found[0].data["peaks"])
        notes.append(f"roofline of {roofs.name}: {roofs.dram_bytes_per_s / 1e12:.2f} TB/s DRAM, "
                     f"{roofs.flops['fp32'] / 1e12:.1f} TFLOP/s fp32 ({roofs.source})")
    notes += [f"NCU rule messages: {why}"] if why else []
    return CandidateProfile(found, notes, seconds, text)


def _message(name: str, c: roofline.Classification, share: float) -> str:
    head = {
        "memory": f"memory-bound ({c.level} {c.memory_pct:.0f}% of peak)",
        "compute": f"compute-bound ({c.level} {c.compute_pct:.0f}% of peak)",
        "latency": f"latency-bound ({c.level}; memory {c.memory_pct:.0f}%, compute {c.compute_pct:.0f}%)",
    }[c.bound]
    ai = "n/a" if c.intensity is None else f"{c.intensity:.2f}"
    return (
        f"{name}: {head}, {c.time_s * 1e6:.1f} us, {c.bytes_per_s / 1e9:.0f} GB/s, "
        f"{c.flops_per_s / 1e12:.2f} TFLOP/s, AI {ai} FLOP/B (ridge {c.ridge:.1f}); "
        f"~{c.gain_s * 1e6:.1f} us ({share:.0%}) above roofline. {c.reasons[0] if c.reasons else ''}"
    ).rstrip()


def findings(
    metrics_by_kernel: Mapping[str, Mapping[str, float]],
    source_map: SourceMap | None = None,
    peaks: roofline.Peaks | None = None,
    *,
    target: Target | None = None,
) -> list[Finding]:
    """One Finding per profiled kernel, largest estimated gain first.

    Judged against `peaks`, else `target`'s, else those of the device in the metrics' own device
    attributes (one device ran them all), else this process's target."""
    if peaks is None:
        if target is None:
            target = next((t for m in metrics_by_kernel.values() if (t := Target.from_ncu(m)) is not None), None)
        peaks = roofline.Peaks.of(target or Target.current())
    classes = {k: roofline.classify(m, peaks) for k, m in metrics_by_kernel.items()}
    # A kernel launched n times costs n times its median; the share is of the whole profiled time.
    counts = {k: metrics_by_kernel[k].get("launches", 1.0) or 1.0 for k in classes}
    total = sum(c.time_s * counts[k] for k, c in classes.items()) or 1.0
    out: list[Finding] = []
    for kernel, c in classes.items():
        gain = c.gain_s * counts[kernel]
        share = gain / total
        fn = source_map.lookup(kernel) if source_map is not None else None
        m = metrics_by_kernel[kernel]
        data = c.as_dict() | {"launches": counts[kernel], "gain_total_s": gain, "gain_share": share,
                              "peak_bytes_per_s": peaks.dram_bytes_per_s, "peak_flops_per_s": c.ridge * peaks.dram_bytes_per_s,
                              "occupancy_pct": m.get(roofline.OCCUPANCY), "registers": m.get(roofline.REGISTERS),
                              "theoretical_occupancy_pct": m.get(roofline.THEORETICAL_OCCUPANCY),
                              "shared_mem_per_block": _shared_bytes(m), "peaks": peaks.as_dict()}
        if fn is not None:
            r = fn.name_range
            data["range"] = [r.start_line, r.start_col, r.end_line, r.end_col]
        out.append(
            Finding(
                code=f"{c.bound}-bound",
                message=_message(fn.name if fn else base_name(kernel), c, share),
                severity="warning" if share >= WARN_SHARE else "info",
                kernel=kernel,
                line=fn.line if fn else None,
                file=fn.file if fn else None,
                data=data,
            )
        )
    out.sort(key=lambda f: -f.data["gain_total_s"])
    return out


def _shared_bytes(m: Mapping[str, float]) -> float | None:
    parts = [m.get(k) for k in (roofline.SHARED_STATIC, roofline.SHARED_DYNAMIC)]
    return None if all(p is None for p in parts) else sum(p or 0.0 for p in parts)


def feedback_text(found: Sequence[Finding], limit: int = 8) -> str:
    """Profile findings for the Coder's next attempt, largest estimated gain first."""
    if not found:
        return "Profile: no kernel findings."
    ordered = sorted(found, key=lambda f: -float(f.data.get("gain_total_s", 0.0)))
    lines = ["Profile (Nsight Compute), kernels by estimated gain:"]
    for k, f in enumerate(ordered[:limit], 1):
        where = f" [{f.file}:{f.line}]" if f.file and f.line else ""
        lines.append(f"{k}. {f.message}{where}")
        lines.extend(f"   - {r}" for r in f.data.get("reasons", [])[1:])
    if len(ordered) > limit:
        lines.append(f"... and {len(ordered) - limit} more kernels with smaller gains")
    return "\n".join(lines)
