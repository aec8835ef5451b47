"""The reference's profiles, kept per file content: a second optimisation of an unchanged module on the
same GPU and torch reuses them instead of profiling again (seconds of torch.profiler and up to a
minute and a half of Nsight Systems before the first candidate).

The key is everything a profile depends on that can be named cheaply: the task file's bytes, the
class and its input functions, the profiler (torch.profiler or nsys) and its iterations, the device's
name, and the torch and Python versions. A module that imports a sibling file whose contents changed
keeps its cached profile: the profile is advice for the planner (which ops to rank first), never a
verdict, and it says where it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from stitchcuda import paths
from stitchcuda.types import Task

VERSION = 1  # of the stored form; bump to drop every cached profile


def folder() -> Path:
    return paths.user_cache() / "profiles"


def key(task: Task, kind: str, device_name: str, iterations: int) -> str | None:
    """None where the task file cannot be read: then nothing is cached, and the profiler says why."""
    import torch

    h = hashlib.sha256()
    try:
        h.update(task.path.read_bytes())
    except OSError:
        return None
    # (the mode only where one is asked for: an as-built task keeps the key it had before modes)
    for part in (task.class_name, task.init_inputs_fn, task.inputs_fn, *([task.mode] if task.mode != "as-built" else []),
                 kind, device_name, str(iterations), torch.__version__, sys.version.split()[0], str(VERSION)):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:32]


def load(task: Task, kind: str, device_name: str, iterations: int) -> dict[str, Any] | None:
    k = key(task, kind, device_name, iterations)
    if k is None:
        return None
    path = folder() / f"{k}.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    profile = stored.get("profile")
    if not isinstance(profile, dict):
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(stored.get("saved", 0)))
    profile.setdefault("notes", []).append(
        f"{kind} profile from the cache ({when}, same file content, GPU and torch): not measured again"
    )
    return profile


def save(task: Task, kind: str, device_name: str, iterations: int, profile: dict[str, Any]) -> None:
    """Keep a profile that measured something; a failed one is not worth keeping."""
    k = key(task, kind, device_name, iterations)
    if k is None or profile.get("clock") in (None, "none") or not profile.get("ops"):
        return
    path = folder() / f"{k}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"saved": time.time(), "task": task.name, "profile": profile}))
        os.replace(tmp, path)  # whole or not at all, whoever else writes the same key
    except OSError:
        pass  # a cache that cannot be written costs time, never a result
