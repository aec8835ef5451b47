"""Candidates that ask where they run: a defeat device's first step.

Every check the Verifier makes runs the candidate in processes of its own (the worker, the blind
check's witness), under a sandbox, from a run folder, with StitchCUDA's variables in the
environment. A candidate that reads any of that can tell a check from the user's program and do the
work only under checks (a red-team note, 2026-12-05: the witness looks like the worker, not like the
user's process). Behaviour that depends on who runs it cannot be verified by running it, so the
questions themselves are hack findings (`environment-probe`): the command line, the environment's
variables, the working folder, process, user and host identities, /proc and /sys; in native code
also run-time symbol lookups and raw system calls, which hide which of those is called, and file and
socket access, through which any of it can be read.

Setting a variable (os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0" before a build) asks nothing and
passes; reading one does not. The generated modules ask none of these."""

from __future__ import annotations

import ast
import re

# Python names (dotted, after the module's import aliases) whose use reads the process's identity.
PY_PROBES = {
    "sys.argv": "the command line",
    "sys.orig_argv": "the command line",
    "os.getenv": "an environment variable",
    "os.getenvb": "an environment variable",
    "os.environ": "the environment's variables",
    "os.environb": "the environment's variables",
    "os.getcwd": "the working folder",
    "os.getcwdb": "the working folder",
    "pathlib.Path.cwd": "the working folder",
    "os.getpid": "the process id",
    "os.getppid": "the parent process",
    "os.getpgrp": "the process group",
    "os.getsid": "the session",
    "os.getuid": "the user",
    "os.geteuid": "the user",
    "os.getlogin": "the user",
    "getpass.getuser": "the user",
    "os.uname": "the host",
    "platform.node": "the host",
    "platform.uname": "the host",
    "socket.gethostname": "the host",
}
# os.environ as the target of a write (`os.environ[k] = v`, `del os.environ[k]`) or of an update whose
# result is thrown away: these set the build's environment and read nothing.
_ENV_WRITES = frozenset({"update", "setdefault", "__setitem__"})
_PROC_PATHS = re.compile(r"(^|[^\w])/(proc|sys)/")

# Native code: libc's readers of the same and the environment's array, the ways to call them unnamed
# (run-time symbol lookups, raw system calls), and file and socket access, through which all of it
# (and outputs stored by an earlier run) can be read; a kernel library has no need of any of them.
_NATIVE_CALLS = (
    "getenv|secure_getenv|__secure_getenv|getcwd|get_current_dir_name|getpid|getppid|getpgrp|getsid|getuid|"
    "geteuid|getlogin|getlogin_r|cuserid|gethostname|uname|sysinfo|readlink|readlinkat|getauxval|syscall|"
    "dlsym|dlvsym|dlopen|dlmopen|fopen|fopen64|freopen|open|open64|openat|creat|opendir|scandir|readdir|stat|"
    "lstat|fstatat|statx|access|faccessat|socket|connect|popen|system")
_NATIVE_NAMES = ("environ|__environ|program_invocation_name|program_invocation_short_name|ifstream|ofstream|"
                 "fstream|filesystem")
_NATIVE = re.compile(rf"\b(?:({_NATIVE_CALLS})\s*\(|({_NATIVE_NAMES})\b)")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp")


def python_probes(tree: ast.Module, dotted) -> list[tuple[str, ast.AST]]:
    """(what it reads, node) for each probe in a parsed module; `dotted(node)` resolves a name or
    attribute chain to its origin under the module's aliases."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _PROC_PATHS.search(node.value):
            found.append((f"{node.value!r}: the process's own records", node))
            continue
        if not isinstance(node, ast.Attribute | ast.Name):
            continue
        if isinstance(parents.get(id(node)), ast.Attribute):
            continue  # the chain's outermost attribute names it
        origin = dotted(node) or ""
        name = next((n for n in PY_PROBES if origin == n or origin.startswith(n + ".")), None)
        if name is None or (name.startswith("os.environ") and _writes_env(node, origin, parents)):
            continue
        found.append((f"{origin}: {PY_PROBES[name]}", node))
    return found


def _writes_env(node: ast.AST, origin: str, parents: dict[int, ast.AST]) -> bool:
    """os.environ[...] stored or deleted, or os.environ.update(...) / .setdefault(...) as a statement."""
    if origin.rsplit(".", 1)[-1] in _ENV_WRITES:
        call = parents.get(id(node))
        return isinstance(call, ast.Call) and isinstance(parents.get(id(call)), ast.Expr)
    up = parents.get(id(node))
    return isinstance(up, ast.Subscript) and up.value is node and isinstance(up.ctx, ast.Store | ast.Del)


def native_probes(name: str, text: str) -> list[tuple[int, str]]:
    """(line, what) for each native source line that calls a probe, comments left out."""
    if not name.endswith(NATIVE_SUFFIXES):
        return []
    code = _COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out = []
    for lineno, line in enumerate(code.splitlines(), 1):
        if m := _NATIVE.search(line):
            out.append((lineno, m.group(1) or m.group(2)))
        elif _PROC_PATHS.search(line) and '"' in line:
            out.append((lineno, "/proc or /sys"))
    return out
