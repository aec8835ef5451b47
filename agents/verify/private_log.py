"""An append-only record a candidate's code cannot empty: the list is held only by the keyword defaults
of the two functions over it (reading a function's defaults, and the collector's lists, is refused in
the candidate's windows: audit.py). A module-level list was emptied through a computed sys.modules
lookup (a red-team review, 2026-12-01: call_watch's and offthread's records)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def private_log() -> tuple[Callable[[Any], None], Callable[[], list[Any]]]:
    """(add, entries): add appends an item; entries returns the items so far, in order."""
    log: list[Any] = []

    def add(item: Any, *, _sc_log: list[Any] = log) -> None:
        _sc_log.append(item)

    def entries(*, _sc_log: list[Any] = log) -> list[Any]:
        return list(_sc_log)

    return add, entries
