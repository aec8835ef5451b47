"""Recorded GPU runs stand in for the GPU on machines without one (CI, the editor tests).

A recording is a run's summary.json from `stitchcuda optimize` on a GPU: each attempt's candidate
name, the sha256 of its files and of each file (recordings made since those fields existed) and its
verdict. When the
Verifier has no GPU and `VerifyOptions.replay` names a recording, the candidate is still built for
real (nvcc, in the worker); only the GPU-side results (input-set checks, timings, NCU findings,
the status) come from the recorded verdict of the same candidate, and the verdict says so.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from stitchcuda.types import Candidate, Verdict

# What only a GPU run can tell; everything else (build, static findings) is this machine's own.
GPU_FIELDS = ("status", "correct", "checks", "tolerance", "eager", "compiled", "ours", "ours_gpu", "host_us",
              "compile_first_call_s", "device", "message", "findings", "hack_findings")


def files_digest(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def file_digests(files: dict[str, str]) -> dict[str, str]:
    """Each file's own sha256: a recording with these can match a candidate whose kernels (every
    file but the Python module) are the recorded ones."""
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sorted(files.items())}


def _kernels_of(digests: dict[str, str]) -> dict[str, str]:
    return {name: d for name, d in digests.items() if not name.endswith(".py")}


def load(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    if "attempts" not in data:
        raise ValueError(f"{path}: not a recorded run (no 'attempts')")
    return data


def find(recording: dict[str, Any], candidate: Candidate) -> tuple[dict[str, Any] | None, str]:
    """The recorded verdict for this candidate and how it was matched: "files" (byte-identical),
    "kernels" (identical kernel sources, another Python module around them) or "name"."""
    digest = files_digest(candidate.files)
    for a in recording["attempts"]:
        if a.get("files_sha256") == digest:
            return a["verdict"], "files"
    kernels = _kernels_of(file_digests(candidate.files))
    for a in recording["attempts"]:
        if kernels and _kernels_of(a.get("files_sha256_each") or {}) == kernels:
            return a["verdict"], "kernels"
    for a in recording["attempts"]:
        # Recordings from before files_sha256 match by name: the built-in coder is deterministic,
        # but another torch version may trace differently, so the verdict says which match it was.
        if "files_sha256" not in a and a["candidate"] == candidate.name:
            return a["verdict"], "name"
    return None, ""


def overlay(local: Verdict, recording: dict[str, Any], candidate: Candidate, source: str) -> Verdict:
    """`local` (built here, not run) with the recorded GPU results of the same candidate."""
    if not local.built:
        return local  # a build failure here is this machine's verdict, whatever the GPU said
    recorded, how = find(recording, candidate)
    if recorded is None:
        local.notes.append(f"no recorded GPU verdict for {candidate.name} in {source}")
        return local
    gpu = Verdict.from_dict({"candidate": candidate.name, **{k: recorded[k] for k in GPU_FIELDS if k in recorded}})
    for key in GPU_FIELDS:
        setattr(local, key, getattr(gpu, key))
    meta = recording.get("meta", {})
    local.notes.append(
        f"REPLAYED: GPU results recorded on {meta.get('gpu', '?')} at commit {meta.get('commit', '?')} "
        f"({meta.get('date', '?')}), matched by {_HOW[how]}; "
        "built here for real"
    )
    local.phases["replayed"] = 1.0
    return local


_HOW = {
    "files": "identical files",
    "kernels": "identical kernel sources (the Python module around them differs from the recorded one)",
    "name": "candidate name",
}


def profile_for(recording: dict[str, Any], task_path: Path) -> dict[str, Any] | None:
    """The recorded reference profile, its ops moved onto this copy of the task file (same name):
    the recording names the file by the path it had on the GPU machine."""
    profile = (recording.get("plan") or {}).get("profile")
    if not profile or profile.get("clock") != "cuda":
        return None
    ops = []
    for op in profile.get("ops", []):
        same = Path(op.get("file", "")).name == task_path.name
        ops.append({**op, "file": str(task_path.resolve()) if same else op.get("file")})
    notes = [*profile.get("notes", []), "REPLAYED: recorded on " + str(profile.get("device"))]
    return {**profile, "ops": ops, "notes": notes}
