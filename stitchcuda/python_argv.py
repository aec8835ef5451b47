"""The command line that runs one of our modules in a Python process of its own, with nothing of the
folder it starts in on its import path.

`python -m MOD` puts the working directory first on sys.path; a sandboxed worker, witness or profiling
target starts in the candidate's run folder, so a candidate file named `torch.py` or `numpy.py` (or
one its code writes there while it runs) would be imported in place of the real module, by our own
code, before and after the checks are in place. `-P` says the same from Python 3.11 on; 3.10 has no
such flag, so the path entry is dropped by hand before anything is imported."""

from __future__ import annotations

import sys

_LAUNCH = ("import sys; sys.path.pop(0); import runpy; "
           "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


def module_argv(module: str, *args: str) -> list[str]:
    """argv running `module` as `python -m` would (sys.argv[1:] are `args`), without the start folder on
    sys.path."""
    return [sys.executable, "-c", _LAUNCH.format(module=module), *args]
