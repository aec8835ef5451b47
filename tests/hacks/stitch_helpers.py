"""The helper module of hack_helper_module_probe: asks its process's command line."""

import sys as _s


def checked() -> bool:
    return any("/verify/" in a for a in _s.argv)
