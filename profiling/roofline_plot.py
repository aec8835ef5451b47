"""A roofline chart of profiled kernels as a self-contained SVG (log-log: arithmetic intensity in
FLOP per DRAM byte against achieved FLOP/s, under the GPU's bandwidth and compute roofs). The roofs
are those the findings were judged against (Finding.data["peaks"], `Peaks.from_dict`), named on
the chart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from stitchcuda.target import Target

from .roofline import Peaks

W, H, PAD_L, PAD_B, PAD_T, PAD_R = 640, 400, 70, 50, 20, 20
X_RANGE = (1e-2, 1e3)  # FLOP/byte
Y_RANGE = (1e9, 1e15)  # FLOP/s
COLOURS = {"memory": "#1f77b4", "compute": "#d62728", "latency": "#7f7f7f"}


@dataclass
class Point:
    name: str
    intensity: float  # FLOP per DRAM byte
    flops_per_s: float
    bound: str  # memory | compute | latency


def _x(v: float) -> float:
    lo, hi = (math.log10(b) for b in X_RANGE)
    v = min(max(v, X_RANGE[0]), X_RANGE[1])
    return PAD_L + (math.log10(v) - lo) / (hi - lo) * (W - PAD_L - PAD_R)


def _y(v: float) -> float:
    lo, hi = (math.log10(b) for b in Y_RANGE)
    v = min(max(v, Y_RANGE[0]), Y_RANGE[1])
    return H - PAD_B - (math.log10(v) - lo) / (hi - lo) * (H - PAD_B - PAD_T)


def _roof(bw: float, peak: float, label: str, colour: str) -> list[str]:
    ridge = peak / bw
    pts = [(X_RANGE[0], X_RANGE[0] * bw), (ridge, peak), (X_RANGE[1], peak)]
    path = " ".join(f"{_x(a):.1f},{_y(b):.1f}" for a, b in pts)
    return [f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>',
            f'<text x="{_x(X_RANGE[1]) - 4:.1f}" y="{_y(peak) - 5:.1f}" text-anchor="end" font-size="11" '
            f'fill="{colour}">{escape(label)} {peak / 1e12:.0f} TFLOP/s</text>']


def svg(points: Sequence[Point], peaks: Peaks | None = None) -> str:
    """`peaks`: the profiled device's roofs; this process's target's where the caller has none."""
    if peaks is None:
        peaks = Peaks.of(Target.current())
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" role="img" aria-label="roofline">',
           f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" '
           'fill="none" stroke="#999"/>']
    for e in range(int(math.log10(X_RANGE[0])), int(math.log10(X_RANGE[1])) + 1):
        x = _x(10.0**e)
        out.append(f'<text x="{x:.1f}" y="{H - PAD_B + 16}" text-anchor="middle" font-size="11">1e{e}</text>')
    for e in range(int(math.log10(Y_RANGE[0])), int(math.log10(Y_RANGE[1])) + 1):
        y = _y(10.0**e)
        out.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">1e{e}</text>')
    out.append(f'<text x="{(W + PAD_L) / 2:.0f}" y="{H - 8}" text-anchor="middle" font-size="12">'
               'arithmetic intensity (FLOP / DRAM byte)</text>')
    out.append(f'<text x="14" y="{(H - PAD_B) / 2:.0f}" transform="rotate(-90 14 {(H - PAD_B) / 2:.0f})" '
               'text-anchor="middle" font-size="12">achieved FLOP/s</text>')
    bw = peaks.dram_bytes_per_s
    out.append(f'<text x="{PAD_L + 6}" y="{PAD_T + 14}" font-size="11" fill="#444">roofs: {escape(peaks.name)}, '
               f'{bw / 1e12:.2f} TB/s DRAM</text>')
    out += _roof(bw, peaks.flops["fp32"], "fp32", "#444")
    if "tf32" in peaks.flops:
        out += _roof(bw, peaks.flops["tf32"], "tf32 tensor", "#aaa")
    for p in points:
        if p.intensity <= 0 or p.flops_per_s <= 0:
            continue
        x, y = _x(p.intensity), _y(p.flops_per_s)
        colour = COLOURS.get(p.bound, "#000")
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"><title>{escape(p.name)}: '
                   f'{p.bound}-bound, {p.intensity:.2f} FLOP/B, {p.flops_per_s / 1e12:.2f} TFLOP/s</title></circle>')
        # Labels near the right edge go to the point's left, inside the chart.
        left = x > W - PAD_R - 160
        out.append(f'<text x="{x - 7 if left else x + 7:.1f}" y="{y - 6:.1f}" font-size="10" '
                   f'text-anchor="{"end" if left else "start"}">{escape(p.name[:32])}</text>')
    out.append("</svg>")
    return "\n".join(out)
