"""Where StitchCUDA keeps its own files on the user's machine: one cache folder, never the project.

    STITCHCUDA_CACHE, else $XDG_CACHE_HOME/stitchcuda, else ~/.cache/stitchcuda
      build/     compiled libraries (stitchcuda.runtime)
      profiles/  the reference's cached profiles (stitchcuda.profiling.cache)
      runs/      run folders of optimize and verify, and of the editor's jobs, unless --out or the
                 runsFolder setting names another
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "STITCHCUDA_CACHE"


def user_cache() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "stitchcuda")
    return Path(root)


def runs_dir() -> Path:
    return user_cache() / "runs"
