"""Where the CUDA libraries that generated code links (cuBLAS, cuBLASLt, cuDNN) keep their headers and
shared objects on this machine, and what to install where they are missing.

A CUDA toolkit often has only the compiler (a container's nvcc, a CI machine), while the libraries
themselves came with PyTorch's CUDA wheels (site-packages/nvidia/<lib>/include and lib). The build
looks in, in order: STITCHCUDA_EXTRA_INCLUDE (folders, os.pathsep-separated), the toolkit, the
nvidia-* wheels on sys.path, and the user cache's cuda-headers folder. This module is imported by
generated code through the runtime: torch and the standard library only.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stitchcuda import paths

INCLUDE_ENV = "STITCHCUDA_EXTRA_INCLUDE"

# Library -> (the header its generated code includes, the shared object's name, the wheel that ships both).
LIBRARIES: dict[str, tuple[str, str, str]] = {
    "cublas": ("cublas_v2.h", "libcublas.so", "nvidia-cublas"),
    "cublasLt": ("cublasLt.h", "libcublasLt.so", "nvidia-cublas"),
    "cudnn": ("cudnn.h", "libcudnn.so", "nvidia-cudnn-cu13"),
}


@dataclass
class Found:
    """Compiler and linker arguments for the libraries asked for, and what could not be found."""

    include_flags: list[str] = field(default_factory=list)
    link_args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing_headers: list[str] = field(default_factory=list)  # library names


def toolkit_root(nvcc: str | None) -> Path | None:
    if nvcc:
        return Path(nvcc).resolve().parent.parent
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            return Path(os.environ[env])
    return Path("/usr/local/cuda") if Path("/usr/local/cuda").is_dir() else None


def user_headers() -> Path:
    """Where scripts/cuda_headers.sh puts the headers it fetches (so a plain `stitchcuda optimize`
    after the README's setup finds them, not only the tests)."""
    return paths.user_cache() / "cuda-headers"


def _wheel_dirs(kind: str) -> list[Path]:
    """site-packages/nvidia/*/{include,lib} of every sys.path entry (PyTorch's CUDA wheels)."""
    out: list[Path] = []
    for entry in sys.path:
        root = Path(entry or ".") / "nvidia"
        if root.is_dir():
            out += sorted(p for p in root.glob(f"*/{kind}") if p.is_dir())
    return out


# Where the compiler and linker look without being told (a distribution's libcudnn-dev, say).
SYSTEM_INCLUDE = [Path("/usr/local/include"), Path("/usr/include/x86_64-linux-gnu"), Path("/usr/include")]
SYSTEM_LIB = [Path("/usr/local/lib"), Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu"),
              Path("/usr/lib64"), Path("/usr/lib")]


def default_include_dirs(nvcc: str | None) -> list[Path]:
    """Folders nvcc searches by itself: the toolkit's include and the system's."""
    tk = toolkit_root(nvcc)
    return ([tk / "include", tk / "targets" / "x86_64-linux" / "include"] if tk is not None else []) + SYSTEM_INCLUDE


def default_library_dirs(nvcc: str | None) -> list[Path]:
    """Folders the link finds a plain -lNAME in by itself: the toolkit's lib64 and the system's."""
    tk = toolkit_root(nvcc)
    return ([tk / "lib64"] if tk is not None else []) + SYSTEM_LIB


def include_dirs(nvcc: str | None) -> list[Path]:
    dirs = [Path(p) for p in os.environ.get(INCLUDE_ENV, "").split(os.pathsep) if p]
    dirs += default_include_dirs(nvcc)
    dirs += _wheel_dirs("include")
    dirs.append(user_headers())
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def library_dirs(nvcc: str | None) -> list[Path]:
    tk = toolkit_root(nvcc)
    dirs = default_library_dirs(nvcc)
    dirs += [tk / "lib", tk / "targets" / "x86_64-linux" / "lib"] if tk is not None else []
    dirs += _wheel_dirs("lib")
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def locate(libraries: list[str] | tuple[str, ...], nvcc: str | None) -> Found:
    """Flags that let nvcc compile and link code that uses `libraries`.

    A header in the toolkit or the system's folders needs no flag (nvcc looks there); nor does a
    library in the toolkit's lib64 or the system's lib folders. A library found only as a versioned
    file (the wheels ship libcublas.so.13, no libcublas.so) is linked by its path, with its folder
    as the runtime search path. A library found nowhere is left to the loader: the build still
    compiles and links (a shared object may leave symbols to be resolved when it is loaded), and
    the note says so."""
    found = Found()
    includes = include_dirs(nvcc)
    libs = library_dirs(nvcc)
    implicit_inc = set(default_include_dirs(nvcc))
    implicit_lib = set(default_library_dirs(nvcc))
    for name in libraries:
        header, so, _ = LIBRARIES.get(name, (None, f"lib{name}.so", ""))
        if header is not None:
            where = next((d for d in includes if (d / header).exists()), None)
            if where is None:
                found.missing_headers.append(name)
            elif where not in implicit_inc:
                flag = f"-I{where}"
                if flag not in found.include_flags:
                    found.include_flags.append(flag)
        plain = next((d / so for d in libs if (d / so).exists()), None)
        if plain is not None:
            if plain.parent in implicit_lib:
                found.link_args.append(f"-l{name}")
            else:
                found.link_args += [f"-L{plain.parent}", f"-l{name}", f"-Xlinker=-rpath,{plain.parent}"]
            continue
        versioned = next((p for d in libs for p in sorted(d.glob(f"{so}.*"))), None)
        if versioned is not None:
            # nvcc takes no shared object as an input file: the linker gets it by path.
            found.link_args += [f"-Xlinker={versioned}", f"-Xlinker=-rpath,{versioned.parent}"]
        else:
            found.notes.append(f"{so} not found here: linked unresolved, the loader must find it (CUDA's "
                               f"lib64 or the {LIBRARIES.get(name, ('', '', 'its'))[2]} wheel)")
    return found


def install_hint(missing: list[str]) -> str:
    """What to install for the headers of `missing` libraries, as one sentence."""
    wheels = sorted({LIBRARIES[n][2] for n in missing if n in LIBRARIES})
    headers = ", ".join(LIBRARIES[n][0] for n in missing if n in LIBRARIES)
    return (f"{headers} not found (looked in {INCLUDE_ENV}, the CUDA toolkit, the nvidia-* wheels on sys.path "
            f"and {user_headers()}): install the CUDA toolkit's {' and '.join(missing)} development files, "
            f"or `pip install {' '.join(wheels)}` (PyTorch's CUDA wheels bring them), or point "
            f"{INCLUDE_ENV} at a folder that has them")
