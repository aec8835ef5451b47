"""What a job found, as editor diagnostics and hover text.

- NCU Findings on a generated .cu: anchored to the kernel's name in its definition (the range
  tree-sitter-cuda gave the Finding), severity from the Finding (by estimated gain), code
  memory-bound / compute-bound / latency-bound.
- The Planner's profile of the reference on the user's file: the hottest ops on their lines.
- The Verifier's failures (build errors, wrong results, hack findings) on the candidate's module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from stitchcuda.profiling import ncu_rules
from stitchcuda.types import Finding, Verdict

SOURCE = "stitchcuda"
_SEVERITY = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning,
             "info": lsp.DiagnosticSeverity.Information}
HOT_OPS = 5  # profile lines shown on the user's file
MIN_SHARE = 0.02  # ops under 2% of GPU time are not worth a squiggle


@dataclass
class Annotated:
    """A diagnostic and the hover text for its range."""

    diagnostic: lsp.Diagnostic
    hover: str


def _line_range(line0: int) -> lsp.Range:
    return lsp.Range(lsp.Position(line0, 0), lsp.Position(line0 + 1, 0))


def _finding_range(f: Finding) -> lsp.Range:
    r = f.data.get("range")
    if r:
        return lsp.Range(lsp.Position(r[0], r[1]), lsp.Position(r[2], r[3]))
    return _line_range((f.line or 1) - 1)


def _num(v: Any, scale: float, fmt: str) -> str:
    return "n/a" if v is None else format(float(v) * scale, fmt)


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.0f}%"


def kernel_hover(f: Finding) -> str:
    d = f.data
    rows = [
        ("time per launch", f"{_num(d.get('time_s'), 1e6, '.1f')} us x {_num(d.get('launches'), 1, '.0f')} launches"),
        ("share of profiled time above roofline", f"{_num(d.get('gain_share'), 100, '.0f')}%"
                                                  f" (~{_num(d.get('gain_total_s'), 1e6, '.1f')} us to gain)"),
        ("DRAM bandwidth", f"{_num(d.get('bytes_per_s'), 1e-9, '.0f')} GB/s of "
                           f"{_num(d.get('peak_bytes_per_s'), 1e-9, '.0f')} GB/s"),
        ("FLOP/s", f"{_num(d.get('flops_per_s'), 1e-12, '.2f')} TFLOP/s of "
                   f"{_num(d.get('peak_flops_per_s'), 1e-12, '.1f')} TFLOP/s"),
        ("arithmetic intensity", f"{_num(d.get('intensity'), 1, '.2f')} FLOP/B (ridge {_num(d.get('ridge'), 1, '.1f')})"),
        ("memory / compute throughput", f"{_num(d.get('memory_pct'), 1, '.0f')}% / {_num(d.get('compute_pct'), 1, '.0f')}% of peak"),
        ("achieved / theoretical occupancy", f"{_pct(d.get('occupancy_pct'))} / {_pct(d.get('theoretical_occupancy_pct'))}"),
        ("shared memory per block", _num(d.get("shared_mem_per_block"), 1 / 1024, ".1f") + " KiB"
         if d.get("shared_mem_per_block") is not None else "n/a"),
        ("registers per thread", _num(d.get("registers"), 1, ".0f")),
    ]
    name = f.kernel or "kernel"
    head = f"**{name}**: {f.code} ({d.get('level', '?')})"
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    reasons = "\n".join(f"- {r}" for r in d.get("reasons", []))
    rules = "\n".join(_rule_line(r) for r in d.get("ncu_rules", []))
    rules = f"\n\nNsight Compute's rules:\n{rules}" if rules else ""
    return f"{head}\n\n| | |\n|---|---|\n{table}\n\n{reasons}{rules}".rstrip()


def _rule_line(r: dict[str, Any]) -> str:
    return f"- **{r.get('rule')}**{ncu_rules.estimate(r)}: {r.get('title', '')}. {r.get('message', '')}".rstrip()


def kernel_findings(findings: Iterable[Finding]) -> dict[str, list[Annotated]]:
    """Profile findings by the generated file they point into."""
    out: dict[str, list[Annotated]] = {}
    for f in findings:
        if not f.file or not f.code.endswith("-bound"):
            continue
        diag = lsp.Diagnostic(range=_finding_range(f), message=f.message, severity=_SEVERITY.get(f.severity),
                              code=f.code, source=SOURCE)
        out.setdefault(f.file, []).append(Annotated(diag, kernel_hover(f)))
    return out


def profile_lines(profile: dict[str, Any] | None, path: str) -> list[Annotated]:
    """The reference's hottest ops on the user's lines (information diagnostics)."""
    if not profile or profile.get("clock") not in {"cuda", "cpu"}:
        return []
    what = "GPU time" if profile["clock"] == "cuda" else "CPU time"
    how = (profile.get("notes") or [""])[0]
    ranked = profile.get("ops", [])
    out = []
    for rank, op in enumerate(ranked[:HOT_OPS], 1):
        if op.get("share", 0.0) < MIN_SHARE or not op.get("line") or op.get("file") != path:
            continue
        name = op["op"].removeprefix("aten::")
        module = f" in {op['module']}" if op.get("module") else ""
        msg = f"{name}: {op['share']:.0%} of {what}{module}, {op['time_us']:.1f} us per forward"
        # The editor shows the diagnostic's message beside the hover: the hover adds, not repeats.
        calls = op.get("calls", 1)
        hover = (f"**{name}** in the reference's profile: op {rank} of {len(ranked)} by {what} "
                 f"({op['share']:.1%}), {calls} call{'s' if calls != 1 else ''} per forward; "
                 f"measured on {profile.get('device', '?')}" + (f" ({how})" if how else ""))
        diag = lsp.Diagnostic(range=_line_range(op["line"] - 1), message=msg,
                              severity=lsp.DiagnosticSeverity.Information, code="hot-op", source=SOURCE)
        out.append(Annotated(diag, hover))
    return out


def verdict_problems(v: Verdict, module_file: str) -> dict[str, list[Annotated]]:
    """A rejected candidate's reasons, on the files they point into (else the module's first line)."""
    if v.accepted or v.status in {"unverified", "cancelled"}:
        return {}
    out: dict[str, list[Annotated]] = {}
    items = list(v.hack_findings) + [f for f in v.findings if not f.code.endswith("-bound")]
    if not items:
        items = [Finding(v.status, v.message or v.status)]
    for f in items:
        line = (f.line or 1) - 1
        msg = f"{v.candidate}: {f.message}"
        if v.status == "build-failed" and v.build_log:
            msg += "\n" + "\n".join(v.build_log.strip().splitlines()[-6:])
        diag = lsp.Diagnostic(range=_line_range(line), message=msg, severity=lsp.DiagnosticSeverity.Error,
                              code=f.code, source=SOURCE)
        # No hover of its own: it would only repeat the message the editor already shows there.
        out.setdefault(f.file or module_file, []).append(Annotated(diag, ""))
    return out


def hover_at(items: Iterable[Annotated], pos: lsp.Position) -> str | None:
    def inside(r: lsp.Range) -> bool:
        after_start = (pos.line, pos.character) >= (r.start.line, r.start.character)
        before_end = (pos.line, pos.character) <= (r.end.line, r.end.character)
        return after_start and before_end or (r.start.line <= pos.line < max(r.end.line, r.start.line + 1))

    texts = [a.hover for a in items if a.hover and inside(a.diagnostic.range)]
    return "\n\n---\n\n".join(texts) if texts else None
