"""Nsight Compute's own rule results for a candidate's kernels: the advice its report shows
("Uncoalesced global accesses...", "est. speedup 38%"), with the estimated speedups.

Raw counters carry no rule results: `ncu.profile_candidate` profiles with the `basic` section set
(Speed-of-Light, launch statistics, occupancy: the sections whose rules need no extra replays)
besides its counters, into a report (kept where the caller asks, for the user to open in Nsight
Compute's UI). This module reads that report's rule results with Nsight Compute's Python report
reader, `ncu_report` (shipped under the tool's extras/python, and on PyPI as ncu-report), in a child
process: the reader is a native library, and its failure must stay a note. Nothing here is
required: any failure returns the reason instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from glob import glob
from pathlib import Path

from .source_map import base_name

SECTION_SET = "basic"
# Rule results the Coder and the user can act on; NCU also reports OK and informational ones.
_ACTIONABLE = {"OPTIMIZATION", "WARNING"}
_LINK = re.compile(r"@(url|sass|source|section):([^@]*)@")
# Where each link kind keeps its text: url:TEXT:LINK, sass:ADDRESS:TEXT, source:FILE:LINE:TEXT,
# section:ID:TEXT.
_TEXT_AT = {"url": slice(0, 1), "sass": slice(1, None), "source": slice(2, None), "section": slice(1, None)}

NOT_INSTALLED = "NCU's report reader (ncu_report) is not installed: pip install ncu-report"
# The reader child's exit status where no ncu_report can be imported at all (as opposed to one that
# is there and fails, whose own error is the more useful note).
_NO_READER_EXIT = 3

_READER = r"""
import json, sys
try:
    import ncu_report
except ModuleNotFoundError as e:
    if e.name != "ncu_report":
        raise
    sys.exit(3)  # _NO_READER_EXIT

def kind(enum, value):
    # The reader hands message and speedup types over as plain ints (its enums' values).
    if value is None:
        return None
    try:
        return enum(value).name
    except (ValueError, TypeError):
        return getattr(value, "name", str(value))

ctx = ncu_report.load_report(sys.argv[1])
out = {}
for r in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(r)
    for a in range(rng.num_actions()):
        act = rng.action_by_idx(a)
        rules = []
        for d in act.rule_results_as_dicts():
            msg = d.get("rule_message") or {}
            sp = d.get("speedup_estimation") or {}
            rules.append({
                "rule": d.get("rule_identifier") or d.get("name"),
                "section": d.get("section_identifier"),
                "title": msg.get("title", ""),
                "message": msg.get("message", ""),
                "type": kind(ncu_report.MsgType, msg.get("type")),
                "speedup": sp.get("speedup"),
                "speedup_type": kind(ncu_report.SpeedupType, sp.get("type")),
            })
        out.setdefault(act.name(), []).extend(rules)
print(json.dumps(out))
"""


def reader_paths(ncu: str) -> list[str]:
    """Folders that may hold ncu_report.py: beside this ncu (NCU's own layout); the toolkit's
    nsight-compute-* folder where this ncu is the CUDA toolkit's launcher script; any install."""
    real = Path(ncu).resolve()
    found = [str(real.parent / "extras" / "python")]
    found += sorted(glob(str(real.parent.parent / "nsight-compute-*" / "extras" / "python")), reverse=True)
    found += sorted(glob("/usr/local/cuda*/nsight-compute-*/extras/python"), reverse=True)
    found += sorted(glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)
    return [p for p in dict.fromkeys(found) if Path(p, "ncu_report.py").is_file()]


def plain(message: str) -> str:
    """A rule message without NCU's link markup (@section:Id:text@ -> text), on one line."""
    return " ".join(_LINK.sub(lambda m: ":".join(m.group(2).split(":")[_TEXT_AT[m.group(1)]]), message).split())


def read_rules(report: Path, ncu: str | None, timeout_s: float) -> tuple[dict[str, list[dict]], str]:
    """Kernel (base name) -> actionable rule results, largest estimated speedup first; and why
    there are none, where there are none. `ncu`: the ncu whose own reader comes first; None (no
    Nsight Compute here, a recorded report) reads with whatever ncu_report this interpreter has."""
    env = dict(os.environ)
    extra = reader_paths(ncu) if ncu else []
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(extra + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        res = subprocess.run([sys.executable, "-c", _READER, str(report)], capture_output=True, text=True,
                             timeout=max(1.0, timeout_s), env=env)
    except subprocess.TimeoutExpired:
        return {}, "reading the NCU report ran out of time"
    except OSError as e:
        return {}, f"NCU's report reader could not be started: {e}"
    if res.returncode == _NO_READER_EXIT:
        return {}, NOT_INSTALLED
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return {}, f"NCU's report reader (ncu_report) failed: {last[:200]}"
    try:
        raw = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}, "NCU's report reader printed no results"
    out: dict[str, list[dict]] = {}
    for kernel, rules in raw.items():
        # Several launches of one kernel repeat its rules: one per (rule, title), the largest estimate.
        mine = {(r["rule"], r["title"]): r for r in out.get(base_name(kernel), [])}
        for r in rules:
            if str(r.get("type", "")).upper() not in _ACTIONABLE or not (r.get("title") or r.get("message")):
                continue
            r = dict(r, message=plain(r.get("message", "")))
            key = (r.get("rule"), r.get("title"))
            if key not in mine or (r.get("speedup") or 0.0) > (mine[key].get("speedup") or 0.0):
                mine[key] = r
        if mine:
            out[base_name(kernel)] = sorted(mine.values(), key=lambda r: -(r.get("speedup") or 0.0))
    return out, "" if out else "no actionable NCU rule results"


def estimate(rule: Mapping) -> str:
    """' (est. speedup 38%, local)': NCU's estimate and its kind (global: of the kernel's run time;
    local: of the efficiency of the unit the rule is about)."""
    sp, kind = rule.get("speedup"), rule.get("speedup_type")
    if not isinstance(sp, int | float) or sp <= 0:
        return ""
    kind = f", {str(kind).lower()}" if kind and str(kind).upper() in ("GLOBAL", "LOCAL") else ""
    return f" (est. speedup {sp:.0f}%{kind})"


SUMMARY_CHARS = 120


def summary(rule: Mapping) -> str:
    """One line for a diagnostic: the rule's title (else its message's first sentence, cut at a word
    with an ellipsis where longer) and its estimated speedup."""
    est = estimate(rule).replace(" (est.", " (NCU est.")
    return f"NCU {rule.get('rule')}: {rule.get('title') or _first_sentence(rule.get('message', ''))}{est}"


def _first_sentence(text: str) -> str:
    head = " ".join(str(text).split())
    end = head.find(". ")
    head = head[: end + 1] if end >= 0 else head
    if len(head) <= SUMMARY_CHARS:
        return head
    cut = head.rfind(" ", 0, SUMMARY_CHARS)
    return head[: cut if cut > 0 else SUMMARY_CHARS].rstrip(" ,;:") + "…"
