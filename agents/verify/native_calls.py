"""What a candidate's own native code calls, read from its built library's machine code.

The environment-probe check reads native sources as text (probes.native_probes): a name pasted by a
macro (`PASTE(get, env)`), hidden in C++ inside a Python string built at run time, or taken as a
pointer through a spelling the regexes miss still compiles to a call of libc's getenv, or a load of
its address. The library says so: every call of an imported function goes through its PLT entry
(`call <getenv@plt>`) and every address taken through its GOT entry (`<environ@GLIBC_2.2.5>`), and a
raw system call is a `syscall` instruction. This module disassembles the library (objdump) and reads,
function by function, the imports each one references.

A library nvcc built carries the static CUDA runtime, whose own functions read the environment and
files (getenv, fopen, uname...). Those are told apart by name and size: every function the toolkit's
static archives define is the runtime's (nm -S over libcudart_static.a and its companions), the rest
are the candidate's, its template instantiations included. A function of the candidate's named as
one of the runtime's (a `static` one may be) keeps its own size, which the runtime's does not share;
one that matches both passes (noted in the README's list of what is not caught)."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from stitchcuda import cuda_libs, runtime
from stitchcuda.agents.verify import probes

# Archives nvcc links by default; their functions are the toolkit's, not the candidate's.
_STATIC_ARCHIVES = ("libcudart_static.a", "libcudadevrt.a", "libculibos.a")
_FUNCTION = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
# A reference in an instruction's operand or comment: <name@plt>, <name@GLIBC_2.2.5>, <name+0x10>.
_REFERENCE = re.compile(r"<([^<>\s+]+)(?:\+0x[0-9a-f]+)?>")
_RAW_CALL = re.compile(r"\t(syscall|sysenter|int\s+\$0x80)\b")
# Demangled C++ imports that name a probe: file streams' members, std::filesystem, the date.
_CXX_PROBE = re.compile(r"(basic_[io]?fstream|basic_filebuf|filesystem|system_clock|high_resolution_clock"
                        r"|c10::utils::(?:get|has|check)_env)")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")


def _run(cmd: list[str], timeout: float = 120.0) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def static_archives() -> list[Path]:
    """The toolkit's static archives a library nvcc built may carry (found beside nvcc, or under
    CUDA_HOME, /usr/local/cuda)."""
    roots: list[Path] = []
    nvcc = runtime.find_nvcc()
    for root in (cuda_libs.toolkit_root(nvcc), Path("/usr/local/cuda")):
        if root is not None and root not in roots:
            roots.append(root)
    found: list[Path] = []
    for root in roots:
        for lib in (root / "lib64", root / "targets" / "x86_64-linux" / "lib"):
            for name in _STATIC_ARCHIVES:
                p = lib / name
                if p.is_file() and p.resolve() not in {q.resolve() for q in found}:
                    found.append(p)
    return found


@functools.lru_cache(maxsize=8)
def _defined(paths: tuple[str, ...]) -> Counter[tuple[str, int]] | None:
    """(name, size) of every function the files define (nm -S), counted."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    out = _run([nm, "-S", "--defined-only", *paths])
    if out is None:
        return None
    got: Counter[tuple[str, int]] = Counter()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwWiI":
            got[(parts[3], int(parts[1], 16))] += 1
    return got


def _demangle(names: Iterable[str]) -> dict[str, str]:
    names = sorted(set(names))
    filt = shutil.which("c++filt")
    if not names or filt is None:
        return {n: n for n in names}
    try:
        out = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    lines = out.stdout.splitlines()
    return dict(zip(names, lines, strict=False)) if len(lines) == len(names) else {n: n for n in names}


def _data_pointers(library: Path) -> list[str]:
    """The imported symbols the library's data holds the address of (R_X86_64_64 / R_AARCH64_ABS64
    dynamic relocations), any version dropped."""
    readelf = shutil.which("readelf")
    out = _run([readelf, "-rW", str(library)]) if readelf is not None else None
    names = []
    for line in (out or "").splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[2] in ("R_X86_64_64", "R_AARCH64_ABS64"):
            names.append(parts[4].split("@")[0])
    return names


def probe_calls(library: Path) -> tuple[dict[str, set[str]], str]:
    """({function: the probes it calls or whose address it takes}, a note where it could not read)
    for the candidate's own functions in `library`."""
    objdump, nm = shutil.which("objdump"), shutil.which("nm")
    if objdump is None or nm is None:
        return {}, "native calls not read (no objdump or nm)"
    sizes = _run([nm, "-S", "--defined-only", str(library)])
    listing = _run([objdump, "-d", "--no-show-raw-insn", str(library)], timeout=300.0)
    if sizes is None or listing is None:
        return {}, f"native calls of {library.name} not read (objdump or nm failed)"
    size_at: dict[int, int] = {}
    for line in sizes.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwWiI":
            size_at.setdefault(int(parts[0], 16), int(parts[1], 16))
    toolkit: Counter[tuple[str, int]] = Counter()
    if any(line.endswith(" __cudaRegisterFatBinary") for line in sizes.splitlines()):
        archives = static_archives()
        base = _defined(tuple(str(p) for p in archives)) if archives else None
        if base is None:
            return {}, (f"native calls of {library.name} not read: it carries the static CUDA runtime, whose "
                        "archive was not found to tell its functions from the candidate's")
        toolkit = Counter(base)
    found: dict[str, set[str]] = {}
    cxx: dict[str, set[str]] = {}
    own = False
    current = ""
    code = False
    for line in listing.splitlines():
        if m := _SECTION.match(line):
            # Every section objdump disassembles (the executable ones, whatever their name: a
            # function put in a section of its own was skipped when only .text was read) but the
            # PLT's, whose stubs reference every import, each its own.
            code = not m.group(1).startswith(".plt")
            own = False
            continue
        if not code:
            continue
        if m := _FUNCTION.match(line):
            current = m.group(2)
            key = (current, size_at.get(int(m.group(1), 16), -1))
            own = toolkit[key] <= 0
            if not own:
                toolkit[key] -= 1  # (each of the runtime's functions once: a same-named twin is the candidate's)
            continue
        if not own or not line.startswith(" "):
            continue
        if m := _RAW_CALL.search(line):
            found.setdefault(current, set()).add(m.group(1).split()[0])
        for ref in _REFERENCE.findall(line):
            name, at, _ = ref.partition("@")
            if not at:
                continue  # (a function of the library's own: its name says nothing of what it calls)
            if name in probes.NATIVE_PROBE_NAMES:
                found.setdefault(current, set()).add(name)
            elif name.startswith("_Z"):
                cxx.setdefault(current, set()).add(name)
    # A probe's address stored in the library's data (a table of function pointers): an absolute
    # relocation naming it, which no instruction shows. (The static CUDA runtime has none.)
    for name in _data_pointers(library):
        if name in probes.NATIVE_PROBE_NAMES:
            found.setdefault("(a pointer in its data)", set()).add(name)
        elif name.startswith("_Z"):
            cxx.setdefault("(a pointer in its data)", set()).add(name)
    if cxx:
        plain = _demangle(n for names in cxx.values() for n in names)
        for fn, names in cxx.items():
            for n in names:
                if m := _CXX_PROBE.search(plain.get(n, n)):
                    found.setdefault(fn, set()).add(m.group(1))
    return found, ""
