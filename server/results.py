"""A finished job as one HTML page for an editor's results view: where the reference spends its
time, the verdict of every candidate, the rubric, and the best candidate's kernels on a roofline. Static HTML (no scripts), so a webview
can show it under a strict content security policy."""

from __future__ import annotations

from html import escape
from typing import Any

from stitchcuda.profiling.roofline import Peaks
from stitchcuda.profiling.roofline_plot import Point, svg
from stitchcuda.types import Verdict


def _ms(t: Any) -> str:
    return f"{t.median_ms:.4f}" if t else "-"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


def verdict_rows(attempts: list[dict[str, Any]], best: str | None) -> str:
    rows = []
    for a in attempts:
        v = Verdict.from_dict(a["verdict"])
        r = v.rubric or {}
        mark = " (proposed)" if a["candidate"] == best else ""
        rows.append(
            f"<tr><td>{escape(a['candidate'])}{mark}</td><td>{escape(v.status)}</td><td>{_ms(v.ours)}</td>"
            f"<td>{_ms(v.eager)}</td><td>{_ms(v.compiled)}</td><td>{_x(v.speedup_eager)}</td>"
            f"<td>{_x(v.speedup_compile)}</td><td>{_x(v.speedup_compile_matched)}</td><td>{escape(v.precision)}</td>"
            f"<td>{r.get('total', '-')}</td><td>{escape(v.message[:160])}</td></tr>")
    head = ("<tr><th>candidate</th><th>verdict</th><th>ms</th><th>eager ms</th><th>compile ms</th>"
            "<th>vs eager</th><th>vs compile</th><th>vs compile, same precision</th><th>precision</th>"
            "<th>rubric</th><th>message</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def kernel_section(v: Verdict | None) -> str:
    bound = [f for f in (v.findings if v else []) if f.code.endswith("-bound")]
    if not bound:
        return "<p>No kernel profile (Nsight Compute did not run for this candidate).</p>"
    rows, points = [], []
    for f in bound:
        d = f.data
        name = f.kernel or "?"
        rows.append(f"<tr><td>{escape(name[:60])}</td><td>{escape(f.code)}</td>"
                    f"<td>{float(d.get('time_s', 0)) * 1e6:.1f}</td><td>{float(d.get('bytes_per_s', 0)) / 1e9:.0f}</td>"
                    f"<td>{float(d.get('flops_per_s', 0)) / 1e12:.2f}</td><td>{escape(f.message[:200])}</td></tr>")
        if d.get("intensity"):
            points.append(Point(name.split("(")[0][-40:], float(d["intensity"]), float(d.get("flops_per_s", 0)),
                                f.code.removesuffix("-bound")))
    head = "<tr><th>kernel</th><th>bound</th><th>us</th><th>GB/s</th><th>TFLOP/s</th><th>finding</th></tr>"
    note = "" if points else "<p>No kernel did floating-point work the counters saw: nothing to plot.</p>"
    # The roofs of the GPU the kernels were profiled on (recorded in each finding), not this machine's.
    recorded = next((f.data["peaks"] for f in bound if isinstance(f.data.get("peaks"), dict)), None)
    peaks = Peaks.from_dict(recorded) if recorded else None
    return f"<table>{head}{''.join(rows)}</table>{svg(points, peaks) if points else note}"


def reference_section(profile: dict[str, Any] | None, top: int = 8) -> str:
    """The reference's hottest ops (the Planner's profile), and its timeline where Nsight Systems ran."""
    profile = profile or {}
    if not profile.get("ops"):
        return "<p>No reference profile (no GPU when planning).</p>"
    rows = "".join(
        f"<tr><td>{float(o['share']):.0%}</td><td>{float(o['time_us']):.1f}</td><td>{escape(o['op'])}</td>"
        f"<td>{escape(o.get('module') or '(top)')}</td><td>{o.get('line') or '?'}</td></tr>"
        for o in profile["ops"][:top])
    head = "<tr><th>share</th><th>us per forward</th><th>op</th><th>module</th><th>line</th></tr>"
    where = f"<p>Measured on {escape(str(profile.get('device', '?')))}.</p>"
    t = (profile.get("nsys") or {}).get("timeline") or {}
    if t:
        bound = " (launch-bound)" if t.get("launch_bound") else ""
        where += (f"<p>Nsight Systems: the GPU is busy {t['busy_share']:.0%} of each forward's span{bound}, "
                  f"{t['kernels_per_forward']:.0f} kernels per forward, median {t['median_kernel_us']:.1f} us.</p>")
    return f"{where}<table>{head}{rows}</table>"


def html(summary: dict[str, Any] | None, title: str, message: str) -> str:
    summary = summary or {}
    attempts = summary.get("attempts", [])
    best = summary.get("best")
    best_v = next((Verdict.from_dict(a["verdict"]) for a in attempts if a["candidate"] == best), None)
    style = ("body{font-family:sans-serif;font-size:13px} table{border-collapse:collapse;margin:8px 0}"
             "td,th{border:1px solid #8884;padding:3px 6px;text-align:left}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{style}</style>"
            f"<title>{escape(title)}</title></head><body><h2>{escape(title)}</h2><p>{escape(message)}</p>"
            f"<h3>The reference</h3>{reference_section((summary.get('plan') or {}).get('profile'))}"
            f"<h3>Candidates</h3>{verdict_rows(attempts, best)}<h3>Kernels of the proposal</h3>"
            f"{kernel_section(best_v)}</body></html>")
