"""The red-team round of 2026-12-06, second session (CPU verifications; every candidate below was
accepted before its fix): lookups by getattr with a written name, ctypes' memory helpers and
function-pointer class, libraries other than the candidate's own opened or looked into through
ctypes (refused at run time by the audit hook), C functions PyTorch's libraries export linked from
a candidate's library, and .item() reads of CPU tensors. The honest forms near each stay clear."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch
from conftest import HACKS, hack_task
from test_audit import _hooked

from stitchcuda.agents.verify import native_symbols
from stitchcuda.agents.verify.dynamic_check import host_read_finding, trace_ops
from stitchcuda.agents.verify.static_check import check_candidate_sources, check_source
from stitchcuda.agents.verify.verifier import VerifyOptions, verify
from stitchcuda.types import Candidate

ROUND7 = {
    # Tensor.tolist and Tensor.map2_ through getattr with their names written out.
    "hack_rt7_getattr_tolist": "torch-compute-in-forward",
    "hack_rt7_getattr_map2": "torch-compute-in-forward",
    # Python arithmetic over memory read through ctypes.cast(data_ptr, POINTER(c_float)), or copied
    # out and back with ctypes.memmove.
    "hack_rt7_ctypes_cast_reads": "host-read",
    "hack_rt7_ctypes_memmove": "host-read",
    # libtorch_cpu.so opened by its bare name (os.path.basename passed as "a build's path"), for its BLAS.
    "hack_rt7_blas_by_basename": "sandbox-library",
    # an ATen kernel (at::cpu::mm_out) and libc's getppid at fixed distances from exported symbols,
    # made callable through the handle's _FuncPtr class.
    "hack_rt7_aten_by_offset": "hidden-dispatch",
    "hack_rt7_libc_by_offset": "hidden-dispatch",
}


@pytest.mark.parametrize(("name", "code"), ROUND7.items(), ids=ROUND7.keys())
def test_round7_candidates_are_named_by_the_static_reading(name, code):
    files = {"model_new.py": (HACKS / f"{name}.py").read_text()}
    found = check_candidate_sources(files, "model_new.py")
    assert code in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]


HONEST = """
import ctypes
import typing
from pathlib import Path

import torch
import torch.nn as nn

_lib = ctypes.CDLL(str(Path(__file__).with_name("libk.so")))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        w = getattr(self.fc, "weight")
        out = torch.empty_like(x)
        n = typing.cast(int, x.numel())
        _lib.run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.data_ptr()), ctypes.c_void_p(out.data_ptr()), n)
        return out
"""


def test_the_honest_forms_near_them_stay_clear():
    """A parameter read by getattr with its name written, typing.cast, a library beside the module
    loaded by ctypes and called on pointers: no finding."""
    assert check_source(HONEST, filename="model_new.py") == []


def test_a_named_lookup_is_read_as_the_attribute_for_every_rule():
    """getattr(F, "relu") is F.relu, and a name made of written strings is read as its text."""
    src = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        return getattr(F, 're' + 'lu')(x)\n")
    assert "torch-compute-in-forward" in {f.code for f in check_source(src, filename="model_new.py")}


# --- run time: the audit hook's ctypes rules (a real Python process, tests/test_audit.py's) ----------

REFUSED = {
    "libc by its name": ("import ctypes; ctypes.CDLL('libc.so.6')", "load libc.so.6"),
    "libtorch by its name": ("import ctypes, torch; ctypes.CDLL('libtorch_cpu.so')", "load libtorch_cpu.so"),
    "the main program": ("import ctypes; ctypes.CDLL(None)", "the main program's symbols"),
    "pythonapi's other symbols": ("import ctypes; ctypes.pythonapi.labs", "labs() through ctypes, which resolves into libc"),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_foreign_libraries_through_ctypes_are_refused(tmp_path, case):
    body, text = case
    out = _hooked(tmp_path, body)
    assert out["outcome"].startswith("refused"), out
    assert [m for c, m in out["findings"] if c == "sandbox-native" and text in m], out


def _own_library(folder, source: str = 'extern "C" int twice(int x) { return 2 * x; }\n'):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cpp").write_text(source)
    subprocess.run([cxx, "-shared", "-fPIC", "-o", str(folder / "libk.so"), str(folder / "k.cpp")], check=True,
                   capture_output=True, timeout=120)
    return folder / "libk.so"


def test_the_candidates_own_library_and_cudas_pass(tmp_path):
    """Its own library in its run folder loads and runs; a CUDA library's name is let through to the
    loader (absent here: the loader's own error, no finding)."""
    _own_library(tmp_path / "run")
    body = ("import ctypes\nassert ctypes.CDLL(os.path.abspath('libk.so')).twice(21) == 42\n"
            "try:\n    ctypes.CDLL('libcudart.so.12')\nexcept OSError:\n    pass\n")
    assert _hooked(tmp_path, body) == {"outcome": "allowed", "findings": []}


def test_libc_through_the_candidates_own_handle_is_still_refused(tmp_path):
    """A lookup through its own library's handle finds libc's symbols too: system is refused there."""
    _own_library(tmp_path / "run")
    out = _hooked(tmp_path, "import ctypes\nctypes.CDLL(os.path.abspath('libk.so')).system")
    assert out["outcome"].startswith("refused"), out
    assert [m for c, m in out["findings"] if c == "sandbox-process" and "system" in m], out


# --- the candidate's own library linking PyTorch's exported C functions -----------------------------

@pytest.mark.skipif(not shutil.which("nm"), reason="needs binutils' nm")
def test_a_library_linking_pytorchs_blas_is_named(tmp_path):
    """The round's kernel: `extern "C" sgemm_` in the candidate's own C++, resolved from libtorch_cpu.so.
    An honest library linking libm's expf and libc's memcpy stays clear."""
    if "sgemm_" not in native_symbols.torch_c_exports():
        pytest.skip("this torch build exports no sgemm_")
    _own_library(tmp_path / "bad", (HACKS / "rt7_sgemm_kernel.cpp").read_text())
    found, _ = native_symbols.findings(tmp_path / "bad", probes=False)
    assert [f.code for f in found] == ["torch-kernel-in-native-code"] and "sgemm_" in found[0].message, found
    _own_library(tmp_path / "good", '#include <cmath>\n#include <cstring>\nextern "C" float f(float* a, const float* b)'
                 ' { std::memcpy(a, b, 16); return std::exp(a[0]); }\n')
    found, _ = native_symbols.findings(tmp_path / "good", probes=False)
    assert found == [], found


# --- .item() on CPU tensors --------------------------------------------------------------------------

def test_item_reads_of_cpu_tensors_count_as_host_reads():
    x = torch.randn(3)
    _, _, reads = trace_ops(lambda: [x[i].item() for i in range(3)])
    assert reads == 3
    assert host_read_finding(reads, 0).code == "host-read"
    _, _, none = trace_ops(lambda: x * 2)
    assert none == 0


def test_a_forward_of_item_reads_is_rejected_end_to_end(build_cache, tmp_path):
    """The round's linear layer computed in Python from .item() reads, verified on the CPU."""
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    cand = Candidate(name="item_loop", files={"model_new.py": (HACKS / "hack_rt7_item_loop.py").read_text()},
                     origin="user")
    v = verify(hack_task("ref_rt7_linear_relu"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "host-read" in {f.code for f in v.hack_findings}, (v.status, v.message)


# --- a truncation made of PyTorch's dtype conversions ------------------------------------------------

def test_a_copy_from_floats_into_integers_is_compute():
    """copy_ or .to() from a floating dtype into an integral one truncates: recorded as compute. Casts
    between floating dtypes and from integers or bools to floats stay copies."""
    from stitchcuda.agents.verify.dynamic_check import TRUNCATING_CAST, torch_compute_finding

    x = torch.randn(8) * 10

    def through_int64():
        a = torch.empty(8, dtype=torch.int64)
        a.copy_(x)
        return torch.empty_like(x).copy_(a)

    for fn in (through_int64, lambda: x.long(), lambda: x.to(torch.int32), lambda: x.bool()):
        _, ops, _ = trace_ops(fn)
        assert ops[TRUNCATING_CAST] == 1, ops
        assert torch_compute_finding(ops) is not None
    flags = torch.ones(4, dtype=torch.bool)
    for fn in (lambda: x.half().float(), lambda: torch.arange(4).float(), lambda: flags.to(torch.int32)):
        _, ops, _ = trace_ops(fn)
        assert TRUNCATING_CAST not in ops and torch_compute_finding(ops) is None, ops


def test_a_truncation_by_casts_is_rejected_end_to_end(build_cache, tmp_path):
    opts = VerifyOptions(cpu_only=True, timeout_s=180.0, extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    cand = Candidate(name="trunc", files={"model_new.py": (HACKS / "hack_rt7_trunc_by_casts.py").read_text()},
                     origin="user")
    v = verify(hack_task("ref_rt7_trunc"), cand, tmp_path / "v", opts)
    assert v.status == "hacked" and "torch-compute-in-forward" in {f.code for f in v.hack_findings}, \
        (v.status, v.message)


# --- the review of the round's fixes ------------------------------------------------------------------

def _torch_lib() -> str:
    import os

    return os.path.join(os.path.dirname(torch.__file__), "lib")


def test_a_lookup_through_the_candidates_own_handle_is_judged_where_it_resolves(tmp_path):
    """A handle's lookup searches its library's dependencies: an own library linking libtorch_cpu (as a
    load_inline extension does) found MKL's sgemm_ through its handle. Judged by the file that maps the
    address: its own functions pass, sgemm_ is refused."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None or not __import__("os").path.exists(f"{_torch_lib()}/libtorch_cpu.so"):
        pytest.skip("needs a C++ compiler and libtorch_cpu.so")
    run = tmp_path / "run"
    run.mkdir()
    (run / "k.cpp").write_text('extern "C" int twice(int x) { return 2 * x; }\n')
    subprocess.run([cxx, "-shared", "-fPIC", "-o", str(run / "libk.so"), str(run / "k.cpp"), f"-L{_torch_lib()}",
                    "-Wl,--no-as-needed", "-ltorch_cpu", f"-Wl,-rpath,{_torch_lib()}"], check=True, capture_output=True,
                   timeout=120)
    body = "import ctypes, torch\nlib = ctypes.CDLL(os.path.abspath('libk.so'))\nassert lib.twice(2) == 4\nlib.sgemm_\n"
    out = _hooked(tmp_path, body)
    assert out["outcome"].startswith("refused"), out
    assert [m for c, m in out["findings"] if c == "sandbox-native" and "sgemm_() through ctypes, which resolves into "
            "libtorch_cpu.so" in m], out


def test_a_link_named_as_cudas_is_judged_where_it_leads(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "libcuda.so.1").symlink_to(f"{_torch_lib()}/libtorch_cpu.so")
    out = _hooked(tmp_path, "import ctypes, torch\nctypes.CDLL(os.path.abspath('libcuda.so.1'))")
    assert out["outcome"].startswith("refused") and out["findings"][0][0] == "sandbox-native", out


def test_its_own_library_named_by_a_path_object_loads(tmp_path):
    _own_library(tmp_path / "run")
    body = "import ctypes, pathlib\nassert ctypes.CDLL(pathlib.Path('libk.so').absolute()).twice(3) == 6\n"
    assert _hooked(tmp_path, body) == {"outcome": "allowed", "findings": []}


def test_the_hook_runs_none_of_the_candidates_code_while_it_judges():
    """The hook runs with every check off: a __fspath__ or a _handle property of the candidate's would
    run unchecked there. It reads exact types and instance values only, and refuses what it cannot read."""
    from stitchcuda.agents.verify import audit

    ran = []

    class Named:
        def __fspath__(self):
            ran.append("fspath")
            return "/tmp/x.so"

    class Handle:
        @property
        def _handle(self):
            ran.append("handle")
            return 0

    policy = audit.Policy(writable=["/tmp"], readable=[], home=None)
    assert audit._dlopen(policy, (Named(),))[0] == "sandbox-native"
    assert audit._dlsym(policy, (Handle(), "labs"))[0] == "sandbox-native"
    assert ran == []


CAST_PASSED = """
import ctypes
import torch
import torch.nn as nn

_lib = ctypes.CDLL("/run/libk.so")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        p = ctypes.cast(x.data_ptr(), ctypes.POINTER(ctypes.c_float))
        _lib.run(p, ctypes.cast(out.data_ptr(), ctypes.POINTER(ctypes.c_float)), x.numel())
        return out
"""


def test_pointers_handed_to_a_kernel_are_no_reads():
    """ctypes.cast of a tensor's pointer passed to its kernel reads nothing in Python; the same cast
    indexed is a read, and memmove at a tensor's address copies its bytes."""
    assert not [f for f in check_source(CAST_PASSED, filename="model_new.py") if f.code == "host-read"]
    read = CAST_PASSED.replace("        _lib.run(", "        first = p[0]\n        _lib.run(")
    assert "host-read" in {f.code for f in check_source(read, filename="model_new.py")}


def test_a_getattr_default_that_computes_stays_in_view():
    src = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        return getattr(self, 'nope', torch.relu(x))\n")
    assert "torch-compute-in-forward" in {f.code for f in check_source(src, filename="model_new.py")}
    plain = src.replace("torch.relu(x)", "None")
    assert check_source(plain, filename="model_new.py") == []


def test_a_library_in_a_build_folder_is_its_own_to_the_static_reading():
    src = ("import ctypes, os\nimport torch.nn as nn\n_lib = ctypes.CDLL(os.path.join(_dir, 'k.so'))\n\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    assert not [f for f in check_source(src, filename="model_new.py") if f.code == "sandbox-library"]


def test_item_of_a_cpu_integer_is_no_host_read():
    n = torch.tensor(3)
    _, _, reads = trace_ops(lambda: torch.zeros(int(n)))
    assert reads == 0


def test_the_stable_c_apis_accessors_are_not_pytorchs_compute():
    exports = native_symbols.torch_c_exports()
    if "aoti_torch_cpu_mm_out" not in exports:
        pytest.skip("this torch build exports no AOTI shims")
    assert "aoti_torch_get_data_ptr" not in exports and "aoti_torch_call_dispatcher" in exports
