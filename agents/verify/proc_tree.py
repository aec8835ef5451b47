"""Resident memory of a process and everything it started, for the Verifier's memory limit on each
worker: one read of the process table serves every worker watched at once.

Each worker's watcher asked psutil for its tree ten times a second; psutil finds a process's
children by reading every process's stat file, so 16 watchers over a machine of ~260 processes
spent 16 x 10 x 17 ms of one Python process's time a second: more than the one core its GIL gives,
and the bench's parent slowed as workers were added (H200 x4, level 2: a problem's time outside the
worker's phases 4.6 s with 8 workers, 7.1 s with 16). Here one read, at most every `max_age_s`, is
shared, whatever the number of watchers."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import psutil

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Snapshot:
    children: dict[int, list[int]]
    rss: dict[int, int]  # bytes
    taken: float  # time.monotonic()

    def tree_rss(self, root: int) -> int:
        total, todo, seen = 0, [root], set()
        while todo:
            pid = todo.pop()
            if pid in seen:  # pids reused while the table was read could make a cycle
                continue
            seen.add(pid)
            total += self.rss.get(pid, 0)
            todo.extend(self.children.get(pid, ()))
        return total


def _read_proc() -> Snapshot:
    """Linux: each /proc/PID/stat read once (parent and resident pages are fields 4 and 24)."""
    children: dict[int, list[int]] = defaultdict(list)
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                text = f.read()
        except OSError:  # exited while the table was read
            continue
        # The command name (field 2) may hold spaces and parentheses: fields restart after the last ')'.
        fields = text[text.rfind(b")") + 2 :].split()
        try:
            ppid, pages = int(fields[1]), int(fields[21])
        except (IndexError, ValueError):
            continue
        pid = int(entry.name)
        children[ppid].append(pid)
        rss[pid] = pages * _PAGE
    return Snapshot(dict(children), rss, time.monotonic())


def _read_psutil() -> Snapshot:
    children: dict[int, list[int]] = defaultdict(list)
    rss: dict[int, int] = {}
    for p in psutil.process_iter(["ppid", "memory_info"]):
        info = p.info
        if info.get("memory_info") is None or info.get("ppid") is None:
            continue
        children[info["ppid"]].append(p.pid)
        rss[p.pid] = info["memory_info"].rss
    return Snapshot(dict(children), rss, time.monotonic())


class ProcessTable:
    """The process table, read again only when the last read is older than `max_age_s`; safe to
    ask from many threads (one reads, the others wait for that read)."""

    def __init__(self, max_age_s: float = 0.25):
        self.max_age_s = max_age_s
        self.reads = 0  # how many times the table was read (tests: the cost does not grow with watchers)
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._read = _read_proc if os.path.isdir("/proc/self") else _read_psutil

    def snapshot(self) -> Snapshot:
        with self._lock:
            if self._snap is None or time.monotonic() - self._snap.taken > self.max_age_s:
                self._snap = self._read()
                self.reads += 1
            return self._snap

    def tree_rss(self, root: int) -> int:
        """Bytes resident in `root` and its descendants (0 once it is gone)."""
        return self.snapshot().tree_rss(root)


# Shared by every watcher in this process: the pool's threads and the optimise loop's.
TABLE = ProcessTable()
