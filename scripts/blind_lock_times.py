"""How long each blind check held its GPU's lock, from the run folders a bench left (the witness's
and the referee's step logs, blind.py's `_mark`): where a GPU's serial time goes once the
candidates are built. Writes one JSON: per run folder, the seconds from each step to the next, and
the lock's held seconds per process; and medians and sums over all.

    python3 scripts/blind_lock_times.py OUT.json BENCH_OUT_DIR [...]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

LINE = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) (.+)$")
TAKEN = "the GPU lock taken"
# The step after which the lock is no longer needed, per process (blind.py).
GIVEN_BACK = {"witness": ("forwards done, the lock given back",),
              "referee": ("told: done", "told: nothing", "float64 outputs saved")}


def steps(log: Path) -> list[tuple[float, str]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            t = datetime.strptime(m.group(1), "%H:%M:%S.%f")
            out.append((t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6, m.group(2)))
    return out


def held(marks: list[tuple[float, str]], role: str) -> float | None:
    t0 = next((t for t, s in marks if s == TAKEN), None)
    t1 = next((t for t, s in reversed(marks) if s in GIVEN_BACK[role]), None)
    if t0 is None or t1 is None:
        return None
    return round((t1 - t0) % 86400, 3)  # (past midnight)


def main(argv: list[str]) -> int:
    out, roots = Path(argv[1]), [Path(a) for a in argv[2:]]
    runs: dict[str, dict] = {}
    for root in roots:
        for log in sorted(root.rglob("blind_witness.log")):
            entry = {}
            for role in ("witness", "referee"):
                path = log.parent / f"blind_{role}.log"
                marks = steps(path) if path.is_file() else []
                entry[f"{role}_held_s"] = held(marks, role)
                entry[f"{role}_steps"] = [[round((b[0] - a[0]) % 86400, 3), b[1]] for a, b in zip(marks, marks[1:], strict=False)]
            runs[str(log.parent.relative_to(root))] = entry
    summary = {}
    for role in ("witness", "referee"):
        vals = [r[f"{role}_held_s"] for r in runs.values() if r[f"{role}_held_s"] is not None]
        if vals:
            summary[role] = {"n": len(vals), "median_s": statistics.median(vals), "sum_s": round(sum(vals), 1)}
    out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
