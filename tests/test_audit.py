"""Issue 22, layers 2 and 3: the worker's audit hook on its own (a real Python process with the
hook installed, no bubblewrap), and the static findings for the obvious escape routes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HACKS

from stitchcuda.agents.verify.static_check import check_source

_PRELUDE = """
import json, os, runpy, sys
from stitchcuda.agents.verify import audit
policy = audit.Policy(writable=[{run!r}], readable=[], home={home!r}, trusted=audit.trusted_builders(),
                      candidate=[{run!r}], not_candidate=[{run!r} + "/tmp"])
audit.install(policy)
outcome = "allowed"
try:
    with audit.window():
{worker}
        runpy.run_path({cand!r})
except PermissionError as e:
    outcome = "refused: " + str(e)
print(json.dumps({{"outcome": outcome, "findings": [[f.code, f.message] for f in audit.findings()]}}))
"""


def _hooked(tmp_path: Path, body: str, worker: str = "pass", **env: str) -> dict:
    """Run `body` as the candidate's code (a file in its run folder) in a fresh Python with the hook
    installed, inside a window; `worker` runs first in the same window as the worker's own code (no
    candidate frame on its stack). The outcome and findings."""
    run, home = tmp_path / "run", tmp_path / "home"
    run.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    (home / "secret.txt").write_text("secret")
    cand = run / "model_new.py"
    cand.write_text("import os, sys\n" + textwrap.dedent(body) + "\n")
    code = _PRELUDE.format(run=str(run), home=str(home), cand=str(cand),
                           worker=textwrap.indent(textwrap.dedent(worker), " " * 8))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HOME=str(home), **env), cwd=run)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


REFUSED = {
    "write outside": ("open({outside!r}, 'w').write('x')", "sandbox-write", "write {outside}"),
    "rename onto": ("os.rename('a', {outside!r})", "sandbox-write", "{outside}"),
    "read home": ("open(os.path.expanduser('~/secret.txt')).read()", "sandbox-read", "secret.txt"),
    "list home": ("os.listdir(os.path.expanduser('~'))", "sandbox-read", "list"),
    "subprocess": ("import subprocess; subprocess.run(['true'])", "sandbox-process", "start a process: true"),
    "os.system": ("os.system('true')", "sandbox-process", "os.system"),
    "os.fork": ("os.fork()", "sandbox-process", "os.fork"),
    "os.exec": ("os.execv('/bin/true', ['true'])", "sandbox-process", "os.exec"),
    "posix_spawn": ("os.posix_spawn('/bin/true', ['true'], {{}})", "sandbox-process", "os.posix_spawn"),
    # (the main program's handle is refused as it opens, before any lookup through it: libc's system
    # through the candidate's own library's handle, tests/test_redteam_round7.py)
    "ctypes system": ("import ctypes; ctypes.CDLL(None).system", "sandbox-native", "the main program's symbols"),
    "signal parent": ("os.kill(os.getppid(), 0)", "sandbox-signal", "the worker's parent"),
    "connect": ("import socket; socket.socket().connect(('127.0.0.1', 9))", "sandbox-network", "127.0.0.1:9"),
    "resolve": ("import socket; socket.getaddrinfo('example.com', 80)", "sandbox-network", "resolve example.com"),
    # The worker's own objects (its verdict, its report's key) are reachable through these.
    "gc objects": ("import gc; gc.get_objects()", "sandbox-introspect", "gc.get_objects"),
    "gc referrers": ("import gc; gc.get_referrers(os)", "sandbox-introspect", "gc.get_referrers"),
    "a frame": ("sys._getframe()", "sandbox-introspect", "sys._getframe"),
    "a frame by inspect": ("import inspect; inspect.currentframe()", "sandbox-introspect", "sys._getframe"),
    "a traceback's frame": ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame",
                            "sandbox-introspect", "tb_frame"),
    "a generator's frame": ("(i for i in ()).gi_frame", "sandbox-introspect", "gi_frame"),
    "a frame by logging": ("import logging; logging.currentframe()", "sandbox-introspect", "sys._getframe"),
    "frames by traceback": ("import traceback; next(traceback.walk_stack(None))", "sandbox-introspect",
                            "sys._getframe"),
    "a trace function": ("sys.settrace(lambda *a: None)", "sandbox-introspect", "sys.settrace"),
    "the C API by ctypes": ("import ctypes; ctypes.pythonapi.PyEval_GetFrame", "sandbox-introspect",
                            "PyEval_GetFrame"),
    "a function's defaults": ("os.path.join.__defaults__ = ()", "sandbox-introspect", "__defaults__"),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_refused_and_named(tmp_path, case):
    body, code, text = case
    outside = str(tmp_path / "outside.txt")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a").write_text("a")
    out = _hooked(tmp_path, body.format(outside=outside))
    assert out["outcome"].startswith("refused"), out
    assert [c for c, m in out["findings"] if c == code and text.format(outside=outside) in m], out
    assert not Path(outside).exists()


ALLOWED = {
    "write in the run folder": "open('mine.txt', 'w').write('x'); os.rename('mine.txt', 'ours.txt')",
    "read outside home": "open('/etc/hostname').read() if os.path.exists('/etc/hostname') else None",
    "signal itself": "import signal; os.kill(os.getpid(), 0)",
    "import a module": "import email.mime.text",
    # The standard library looking at its caller for its own use hands no frame to the candidate.
    "logging": "import logging; logging.getLogger('c').warning('x')",
    "namedtuple": "import collections; collections.namedtuple('P', 'a b')(1, 2)",
    "typing and enum": "import enum, typing; typing.TypeVar('T'); typing.NamedTuple('Q', [('a', int)]); enum.Enum('E', 'A B')",
    "traceback formatted in an except clause": ("import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n"
                                                "    traceback.format_exc()"),
    "logger.exception": ("import logging\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n"
                         "    logging.getLogger('c').exception('x')"),
}


def test_a_library_looking_at_frames_under_the_candidate_s_call_is_not_refused(tmp_path):
    """torch's own uses of frames (custom_op's registration, say) run under the candidate's calls:
    only the candidate's own code, directly or through inspect or traceback, is refused."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper.py").write_text("import gc, sys\ndef look():\n    gc.get_referrers(sys)\n    return sys._getframe()\n")
    out = _hooked(tmp_path, f"sys.path.insert(0, {str(lib)!r}); import helper; helper.look()")
    assert out == {"outcome": "allowed", "findings": []}


@pytest.mark.parametrize("body", ALLOWED.values(), ids=ALLOWED.keys())
def test_allowed(tmp_path, body):
    out = _hooked(tmp_path, body)
    assert out == {"outcome": "allowed", "findings": []}


def test_builders_may_start_their_compilers(tmp_path):
    """runtime.build runs the compiler while the candidate's module imports: allowed. The same
    compiler started by the candidate's own code is not."""
    body = f"""
from stitchcuda import runtime
runtime._tool_versions.clear()
print(runtime.build([{str(HACKS / 'kernels.cpp')!r}]).library, file=sys.stderr)
"""
    out = _hooked(tmp_path, body, STITCHCUDA_CACHE=str(tmp_path / "run" / "cache"))
    assert out == {"outcome": "allowed", "findings": []}
    # A candidate's function handed to the builder (here: patched into it) is still the candidate's.
    body = """
import subprocess
from stitchcuda import runtime
runtime._tool_versions.clear()
runtime._tool_version = lambda tool: subprocess.run(["true"]) and "x"
runtime.build([__import__("os").path.abspath("k.cpp")])
"""
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "k.cpp").write_text("int x;\n")
    out = _hooked(tmp_path, body, STITCHCUDA_CACHE=str(tmp_path / "run" / "cache"))
    assert out["outcome"].startswith("refused") and out["findings"][0][0] == "sandbox-process", out


def test_inactive_outside_the_window(tmp_path):
    body = "from stitchcuda.agents.verify import audit\naudit.deactivate(); os.system('true'); open({!r}, 'w')"
    out = _hooked(tmp_path, body.format(str(tmp_path / "o")))
    assert out == {"outcome": "allowed", "findings": []}


def test_inside_a_window_only_the_candidates_own_code_is_refused(tmp_path):
    """The revert's cause: torch (or the worker) writing, listing the home folder or starting a
    process while a window is open, with no frame of the candidate's files on its stack, is not the
    candidate's doing; the same library calls made from the candidate's code are."""
    outside, listed = tmp_path / "torch_cache" / "x.bin", str(tmp_path / "home")
    worker = f"""
import subprocess, torch
os.makedirs({str(outside.parent)!r}, exist_ok=True)
torch.save(torch.ones(2), {str(outside)!r})
os.listdir({listed!r})
subprocess.run(["true"], check=True)
"""
    out = _hooked(tmp_path, "pass", worker=worker)
    assert out == {"outcome": "allowed", "findings": []} and outside.exists()
    outside.unlink()
    body = f"import torch\ntorch.save(torch.ones(2), {str(outside)!r})"
    out = _hooked(tmp_path, body)
    assert out["outcome"].startswith("refused") and out["findings"][0][0] == "sandbox-write", out
    assert not outside.exists()


_FRAMELESS = r"""
#include <thread>
extern "C" {
typedef struct _object PyObject;
int PyGILState_Ensure(void);
void PyGILState_Release(int);
PyObject* PyImport_ImportModule(const char*);
PyObject* PyObject_GetAttrString(PyObject*, const char*);
PyObject* PyObject_CallFunctionObjArgs(PyObject*, ...);
void PyErr_Clear(void);
int ask() {
  int listed = -1;
  std::thread t([&] {
    int g = PyGILState_Ensure();
    PyObject* gc = PyImport_ImportModule("gc");
    PyObject* get = gc ? PyObject_GetAttrString(gc, "get_objects") : nullptr;
    listed = get && PyObject_CallFunctionObjArgs(get, nullptr) != nullptr;
    PyErr_Clear();
    PyGILState_Release(g);
  });
  t.join();
  return listed;
}
}
"""


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++")), reason="needs a C++ compiler")
def test_what_native_code_asks_from_a_thread_of_no_python_frame_is_refused(tmp_path):
    """The collector's lists asked for by a library's own thread, which has no Python frame under it:
    only native code asks so, whoever called the library (here the worker's own code). Code
    compiled from a string, which has no file of its own, is judged by its caller: the worker's
    listing through it stays allowed."""
    lib = tmp_path / "frameless.so"
    src = tmp_path / "frameless.cpp"
    src.write_text(_FRAMELESS)
    subprocess.run([shutil.which("g++") or shutil.which("c++"), "-shared", "-fPIC", "-O1", "-o", str(lib), str(src),
                    "-lpthread"], check=True)
    worker = f"""
import ctypes
exec(compile("import gc; gc.get_objects()", "<string>", "exec"))
print("listed:", ctypes.CDLL({str(lib)!r}).ask())
"""
    out = _hooked(tmp_path, "pass", worker=worker)
    assert [m for c, m in out["findings"] if c == "sandbox-introspect" and "gc.get_objects" in m], out
    assert len(out["findings"]) == 1, out


_THROUGH_CALL = r"""
typedef struct _object PyObject;
int PyGILState_Ensure(void); void PyGILState_Release(int);
PyObject* PyImport_ImportModule(const char*);
PyObject* PyObject_GetAttrString(PyObject*, const char*);
PyObject* PyObject_CallFunction(PyObject*, const char*, ...);
PyObject* PyObject_CallMethod(PyObject*, const char*, const char*, ...);
PyObject* PyObject_CallNoArgs(PyObject*);
void PyErr_Clear(void);
int direct(void* stream) {
  int g = PyGILState_Ensure();
  PyObject* gc = PyImport_ImportModule("gc");
  if (gc) PyObject_CallNoArgs(PyObject_GetAttrString(gc, "get_objects"));
  PyErr_Clear();
  PyGILState_Release(g);
  return 0;
}
int via_timeit(void* stream) {
  int g = PyGILState_Ensure();
  PyObject* t = PyImport_ImportModule("timeit");
  PyObject* timer = t ? PyObject_CallFunction(PyObject_GetAttrString(t, "Timer"), "s",
                                              "import gc; gc.get_objects()") : 0;
  if (timer) PyObject_CallMethod(timer, "timeit", "i", 1);
  PyErr_Clear();
  PyGILState_Release(g);
  return 0;
}
"""


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs a C compiler")
@pytest.mark.parametrize("entry,refused", [("direct", "gc.get_objects"), ("via_timeit", "compile source")])
def test_what_a_library_asks_during_the_verifiers_call_into_it_is_refused(tmp_path, entry, refused):
    """A library run by runtime.Library.call (the kernels' loader, from the worker's code here) asks for
    the collector's lists itself, or through timeit with a string: either way the call into it is the
    first caller, which asks for nothing itself (a review, 2026-12-04, found the timeit route open)."""
    (tmp_path / "lib.c").write_text(_THROUGH_CALL)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "lib.so"), str(tmp_path / "lib.c")], check=True)
    worker = f"""
from pathlib import Path
from stitchcuda.runtime import Library
Library(Path({str(tmp_path / 'lib.so')!r})).call({entry!r})
"""
    out = _hooked(tmp_path, "pass", worker=worker)
    assert [m for c, m in out["findings"] if c == "sandbox-introspect" and refused in m], out


def test_the_candidates_code_is_refused_on_any_thread(tmp_path):
    """A function of the candidate's run on a thread it started: its frame is on that thread's stack."""
    target = str(tmp_path / "t.txt")
    body = f"""
import threading
err = []
def write():
    try:
        open({target!r}, "w")
    except PermissionError as e:
        err.append(e)
t = threading.Thread(target=write); t.start(); t.join()
assert err
"""
    out = _hooked(tmp_path, body)
    assert [c for c, m in out["findings"] if c == "sandbox-write" and target in m], out
    assert not Path(target).exists()


def test_code_the_candidate_writes_into_the_temp_folder_is_still_refused_from_its_own_calls(tmp_path):
    """The temp folder's code (torch's generated modules) is not the candidate's, but a call from the
    candidate's code into a module it wrote there still has the candidate's frame below it."""
    target = str(tmp_path / "t.txt")
    body = f"""
os.makedirs("tmp", exist_ok=True)
open("tmp/helper.py", "w").write("def go(p):\\n    open(p, 'w')\\n")
sys.path.insert(0, os.path.abspath("tmp"))
import helper
helper.go({target!r})
"""
    out = _hooked(tmp_path, body)
    assert out["outcome"].startswith("refused") and out["findings"][0][0] == "sandbox-write", out


# --- layer 3: static findings -------------------------------------------------------------------


def _static(stem: str) -> set[tuple[str, int | None]]:
    return {(f.code, f.line) for f in check_source((HACKS / f"{stem}.py").read_text())}


@pytest.mark.parametrize(("stem", "codes"), [
    ("escape_spawn", {"sandbox-process", "sandbox-library"}),
    ("escape_network", {"sandbox-network"}),
    ("escape_read_home", {"sandbox-read"}),
    ("escape_signal_parent", {"sandbox-signal"}),
])
def test_static_names_the_obvious_routes(stem, codes):
    assert codes <= {c for c, _ in _static(stem)}


STATIC = {
    "open absolute for writing": ("open('/etc/passwd', 'a')", "sandbox-write"),
    "Path write_text": ("Path('/home/u/.bashrc').write_text('x')", "sandbox-write"),
    "os.remove absolute": ("os.remove('/tmp/x')", "sandbox-write"),
    "Path.home": ("Path(Path.home() / '.ssh').mkdir()", "sandbox-write"),
    "shutil": ("shutil.rmtree('x')", "sandbox-write"),
    "cdll attribute": ("ctypes.cdll.LoadLibrary('libc.so.6').system(b'x')", "sandbox-library"),
    "os.popen": ("os.popen('ls')", "sandbox-process"),
}


@pytest.mark.parametrize("case", STATIC.values(), ids=STATIC.keys())
def test_static_escape_findings(case):
    line, code = case
    src = ("import ctypes\nimport os\nimport shutil\nfrom pathlib import Path\nimport torch.nn as nn\n\n"
           f"class ModelNew(nn.Module):\n    def forward(self, x):\n        {line}\n        return x\n")
    found = {f.code: f.line for f in check_source(src)}
    assert found.get(code) == 9 or (code == "sandbox-write" and "shutil" in line and code in found), found


def test_static_leaves_the_candidates_own_library_alone():
    src = ("import ctypes\nfrom pathlib import Path\nimport torch.nn as nn\n"
           "_lib = ctypes.CDLL(str(Path(__file__).with_name('lib.so')))\n\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    assert not [f for f in check_source(src) if f.code.startswith("sandbox-")]
    for stem in ("good_affine", "good_linear", "good_shifted_norm", "gpu_good_cublas"):
        assert not [f for f in check_source((HACKS / f"{stem}.py").read_text()) if f.code.startswith("sandbox-")]


def test_static_leaves_the_shipped_kernel_loader_alone():
    """Generated modules carry stitchcuda/kernel_loader.py verbatim (its ctypes.CDLL loads the
    candidate's own library): no escape finding. An edited copy that loads libc is found."""
    from stitchcuda import kernel_loader

    head = "import torch.nn as nn\n"
    tail = "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert not [f for f in check_source(head + kernel_loader.source_text() + tail) if f.code.startswith("sandbox-")]
    edited = kernel_loader.source_text().replace("ctypes.CDLL(str(path))", 'ctypes.CDLL("libc.so.6")')
    assert "sandbox-library" in {f.code for f in check_source(head + edited + tail)}


def test_a_finaliser_of_the_candidate_s_run_outside_every_window_is_still_refused(tmp_path):
    """A collection in the worker's own code (outside every window) runs the candidate's finaliser:
    its reach for the collector's lists is refused there too (the worker's verdict, and its report's
    key, are what it would find)."""
    run = tmp_path / "run"
    run.mkdir()
    cand = run / "model_new.py"
    cand.write_text(textwrap.dedent("""
        import gc
        class Reach:
            def __del__(self):
                FOUND.append(len(gc.get_objects()))
        FOUND = []
        a, b = Reach(), Reach()
        a.other, b.other = b, a  # a cycle: freed by the next collection, not here
        del a, b
    """))
    code = textwrap.dedent(f"""
        import gc, json, runpy
        from stitchcuda.agents.verify import audit
        audit.install(audit.Policy(writable=[{str(run)!r}], readable=[], home=None, candidate=[{str(run)!r}]))
        gc.disable()
        with audit.window():
            mod = runpy.run_path({str(cand)!r})
        gc.collect()  # the worker's own, outside the window
        print(json.dumps({{"found": mod["FOUND"], "findings": [f.code for f in audit.findings()]}}))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=run)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"found": [], "findings": ["sandbox-introspect"]}, (out, p.stderr[-2000:])


_PLANTED = """
import json, os, runpy, sys
from stitchcuda.agents.verify import audit
run = {run!r}
audit.install(audit.Policy(writable=[run], readable=[], home=None, trusted=audit.trusted_builders(),
                           candidate=[run], not_candidate=[run + "/tmp"]))
os.makedirs(run + "/tmp", exist_ok=True)
# Written outside the hook's sight, as the candidate's native code could write it.
with open(run + "/tmp/{module}.py", "w") as f:
    f.write("import gc\\ndef look():\\n    return len(gc.get_objects())\\n")
outcome = "allowed"
try:
    with audit.window():
        runpy.run_path({cand!r})
    with audit.window():  # the worker's own import, later, with no frame of the candidate's below it
        __import__({module!r}).look()
except PermissionError as e:
    outcome = "refused: " + str(e)
print(json.dumps({{"outcome": outcome}}))
"""


@pytest.mark.parametrize("arrange", [
    "sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'tmp'))",
    # a finder of its own on sys.meta_path, which hands the planted file to the standard loader
    "import importlib.util\n"
    "class Finder:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'planted_by_finder':\n"
    "            f = os.path.join(os.path.dirname(__file__), 'tmp', name + '.py')\n"
    "            return importlib.util.spec_from_file_location(name, f)\n"
    "sys.meta_path.insert(0, Finder())",
], ids=["sys.path", "a finder"])
def test_a_module_planted_in_the_temp_folder_runs_as_the_candidate_s(tmp_path, arrange):
    """The temp folder holds torch's generated code, which is not the candidate's; a module planted
    there and imported later by the worker's own code, through an import path the candidate
    arranged, is: its reach for the collector's lists is refused."""
    run = tmp_path / "run"
    run.mkdir()
    cand = run / "model_new.py"
    cand.write_text("import os, sys\n" + arrange + "\n")
    module = "planted_by_finder" if "Finder" in arrange else "planted_on_path"
    p = subprocess.run([sys.executable, "-c", _PLANTED.format(run=str(run), cand=str(cand), module=module)],
                       capture_output=True, text=True, timeout=120, cwd=run)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["outcome"].startswith("refused") and "gc.get_objects" in out["outcome"], out
