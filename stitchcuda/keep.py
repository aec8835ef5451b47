"""A proposal the user can keep: beside the sources, the kernels' library prebuilt for the GPU arches
it will run on, which the generated module loads without StitchCUDA or nvcc (kernel_loader)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stitchcuda import runtime
from stitchcuda.kernel_loader import prebuilt_name
from stitchcuda.task import UsageError
from stitchcuda.types import Candidate


@dataclass(frozen=True)
class Kept:
    library: Path | None  # the prebuilt library in the proposal folder, if one was built
    arches: tuple[str, ...]
    reason: str = ""  # why there is none
    seconds: float = 0.0  # the build's (0 where the same sources and flags were built before)


def prebuild_proposal(candidate: Candidate, folder: Path, arches: Sequence[str] = (),
                      wrap: Callable[[list[str]], list[str]] | None = None, env: dict[str, str] | None = None) -> Kept:
    """Build the candidate's kernels into `folder` (written already) for `arches`, else for this
    machine's GPU. A failure is reported, never raised: the sources alone still work where
    StitchCUDA and nvcc are installed.

    The Verifier does this in the candidate's folder before it runs it, so the library it checks
    and times is the one the proposal ships: the build is cached by sources and flags, and the
    proposal's copy comes from that cache. `wrap`: the sandbox the compiler runs in (the candidate's
    own, `folder` writable in it), as runtime.build says."""
    if not candidate.kernels_source:
        return Kept(None, (), "its module builds its own kernels")
    wanted = tuple(arches) or (runtime.default_arch(),)
    source = folder / candidate.kernels_source
    try:
        result = runtime.build([source], arch=list(wanted), libraries=candidate.libraries, wrap=wrap,
                               scratch=folder if wrap is not None else None, env=env)
        # Under the name the module's loader looks for: the digest of the sources it was built from.
        library = source.with_name(prebuilt_name(source))
        shutil.copyfile(result.library, library)
    except (runtime.BuildError, OSError, ValueError) as e:
        return Kept(None, wanted, str(e))
    return Kept(library, wanted, seconds=result.seconds)


def parse_arches(text: str | None) -> tuple[str, ...]:
    """`sm_80,sm_90` or `80,90` -> ("sm_80", "sm_90"); empty -> ()."""
    if not text:
        return ()
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        arch = part if part.startswith("sm_") else f"sm_{part}"
        if not arch.removeprefix("sm_").rstrip("af").isdigit():
            raise UsageError(f"not a GPU arch: {part!r} (write sm_80, sm_90, ...)")
        out.append(arch)
    return tuple(out)
