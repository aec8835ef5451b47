"""The blind check's witness in a folder of its own: only what the Verifier wrote there, never what
the candidate's worker wrote.

The worker runs the candidate for minutes, and its run folder is the one place it may write. A
witness sharing that folder could read whatever the worker left there: every input set it was given
(red-team round 15 kept them in memory; a file carries them as well), its own outputs, anything it
learnt of the reference. Here the witness gets a fresh folder outside the run folder, which the
worker's sandbox never had, holding the candidate's files as the Verifier wrote them and its
prebuilt library copied before any of the candidate's code ran; the worker's run folder is hidden
from the witness behind an empty tmpfs. A library the candidate's module builds for itself at import
is built again there: its build in the worker ran the candidate's code, and what that left beside the
library is the candidate's to have written.

Without bubblewrap (Box.active false) the two processes share the whole filesystem, as they share
everything else: the verdict says the run was not sandboxed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from stitchcuda.agents.verify.sandbox import Box
from stitchcuda.types import Candidate


class WitnessHome:
    """The witness's folder (`folder`), the candidate's module in it (`module`), and its sandbox (`box`)."""

    def __init__(self, candidate: Candidate, run_dir: Path, env: dict[str, str], *, reference: Path | None,
                 locks: Iterable[str | Path | None] = ()) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="stitchcuda-witness-")
        self.folder = Path(self._tmp.name)
        self.module = candidate.write(self.folder)
        self.box = Box.for_run(self.folder, env, reference=reference, locks=locks, hide=[Path(run_dir)])

    def stage(self, library: Path | None) -> None:
        """The candidate's prebuilt library beside its module here, under the name its loader looks
        for; called before the worker is told to import the candidate, so the copy is the build's."""
        if library is not None and library.is_file():
            shutil.copyfile(library, self.folder / library.name)

    def request(self, req: dict) -> dict:
        """The worker's request as the witness must see it: the candidate's module here."""
        return dict(req, candidate=str(self.module), run_dir=str(self.folder))

    def close(self) -> None:
        self._tmp.cleanup()
