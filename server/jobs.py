"""Optimisation jobs for the language server: each one is `stitchcuda optimize --events` in a child
process, so the server's event loop only reads JSON lines (the typed events of stitchcuda/events.py)
and a crash of the pipeline (or of a candidate's worker under it) is a failed job, never a dead server.

Cancelling sends SIGTERM to the job's process group (the CLI turns it into the pipeline's cancel
event, which kills the running worker) and SIGKILL if it has not ended a few seconds later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitchcuda import events, paths
from stitchcuda.events import Event, ProgressEvent, RoundVerdict, RunEnd
from stitchcuda.settings import Settings

KILL_AFTER_S = 10.0


def runs_root(settings: Settings) -> Path:
    if settings.runs_folder:
        return Path(settings.runs_folder)
    return paths.runs_dir()


@dataclass
class Job:
    id: str
    path: Path
    class_name: str
    run_dir: Path
    settings: Settings
    state: str = "running"  # running | done | failed | cancelled
    message: str = ""
    events: list[Event] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    proposal: dict[str, str] = field(default_factory=dict)  # file name -> text
    # Prebuilt kernel libraries beside the proposal's sources (binary: copied on accept, not edited in).
    libraries: list[Path] = field(default_factory=list)
    result: RunEnd | None = None  # the run's last event, once it has ended with one
    _proc: asyncio.subprocess.Process | None = None
    _cancelled: bool = False

    @classmethod
    def new(cls, path: Path, class_name: str, settings: Settings) -> Job:
        jid = uuid.uuid4().hex[:8]
        return cls(jid, path, class_name, runs_root(settings) / f"{path.stem}-{class_name}-{jid}", settings)

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "stitchcuda.cli", "optimize", str(self.path), "--class", self.class_name,
                "--out", str(self.run_dir), "--events", *self.settings.cli_args()]

    def env(self) -> dict[str, str]:
        return dict(os.environ, PYTHONUNBUFFERED="1")

    async def run(self, on_event: Callable[[ProgressEvent | RoundVerdict], None]) -> None:
        """Run to the end; every progress and verdict event goes to on_event; state and message say
        how it ended."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        result: RunEnd | None = None
        with (self.run_dir / "job.log").open("wb") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv(), stdout=asyncio.subprocess.PIPE, stderr=log, env=self.env(),
                start_new_session=True, cwd=str(self.path.parent),
            )
            if self._cancelled:  # cancelled while starting
                self._signal(signal.SIGTERM)
            assert self._proc.stdout is not None
            async for raw in self._proc.stdout:
                try:
                    event = events.from_json(raw)
                except ValueError:
                    continue  # a stray print from user code: not ours
                self.events.append(event)
                if isinstance(event, RunEnd):
                    result = event
                else:
                    on_event(event)
            rc = await self._proc.wait()
        self._finish(rc, result)

    def _finish(self, rc: int, result: RunEnd | None) -> None:
        self.result = result
        if result is not None and Path(result.summary or "").is_file():
            self.summary = json.loads(Path(result.summary).read_text())
        if result is not None and result.proposal:
            folder = Path(result.proposal)
            files = [p for p in sorted(folder.iterdir()) if p.is_file()]
            self.proposal = {p.name: p.read_text() for p in files if p.suffix != ".so"}
            self.libraries = [p for p in files if p.suffix == ".so"]
        if self._cancelled:
            self.state, self.message = "cancelled", "cancelled"
        elif result is None:
            tail = (self.run_dir / "job.log").read_text(errors="replace").strip().splitlines()[-3:]
            self.state = "failed"
            self.message = f"the optimisation process ended without a result (exit {rc}): " + " | ".join(tail)
        else:
            self.state, self.message = "done", result.message

    def cancel(self) -> None:
        if self.state != "running" or self._cancelled:
            return
        self._cancelled = True
        if self._proc is not None and self._proc.returncode is None:
            self._signal(signal.SIGTERM)
            asyncio.get_running_loop().call_later(KILL_AFTER_S, self._signal, signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, sig)
