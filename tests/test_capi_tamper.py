"""A candidate's library reaching the worker's interpreter through Python's C API (red team round 4,
2026-12-04): the same loosening of the worker's tolerance, three ways, each rejected by the check
built for it (the library's undefined symbols, the preloaded dlsym watch, the audit hook's reading of
who asked), whatever else also sees it; and a pybind11 extension's own entries pass."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import hack_candidate, hack_task

from stitchcuda.agents.verify import native_symbols, native_threads
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

CXX = shutil.which("g++") or shutil.which("c++")

# What a torch load_inline extension (pybind11) links of Python's C API: its undefined symbols, read
# by nm off one built with torch 2.13 on Python 3.11 (2026-12-04).
PYBIND_ENTRIES = (
    "PyBaseObject_Type PyByteArray_AsString PyBytes_AsStringAndSize PyCFunction_Type PyCMethod_New PyCapsule_New "
    "PyDict_GetItemWithError PyDict_SetDefault PyErr_Fetch PyErr_NormalizeException PyErr_Restore PyErr_WarnEx "
    "PyErr_WriteUnraisable PyEval_AcquireThread PyEval_GetBuiltins PyEval_SaveThread PyException_SetTraceback "
    "PyFrame_GetBack PyFrame_GetCode PyFrame_GetLineNumber PyGILState_Check PyGILState_Ensure "
    "PyGILState_GetThisThreadState PyGILState_Release PyInstanceMethod_New PyInterpreterState_GetDict "
    "PyModuleDef_Init PyModule_AddObject PyModule_NewObject PyObject_CallFunctionObjArgs PyObject_GC_UnTrack "
    "PyObject_GetAttrString PyObject_SetAttrString PyProperty_Type PyThreadState_Clear PyThreadState_DeleteCurrent "
    "PyThreadState_New PyThread_tss_create PyType_FromSpec PyType_Ready PyUnicode_AsUTF8AndSize PyWeakref_NewRef "
    "Py_GetVersion _PyObject_GetDictPtr _PyObject_New _PyThreadState_UncheckedGet _PyType_Lookup _Py_Dealloc").split()


def test_the_entries_that_run_code_or_reach_frames_are_named():
    for name in ("PyRun_SimpleStringFlags", "Py_AddPendingCall", "Py_CompileStringExFlags", "PyEval_EvalCode",
                 "PyEval_GetFrame", "PyThreadState_GetFrame", "PyEval_SetTrace", "PyMarshal_ReadObjectFromString",
                 "PyFunction_New", "PyRun_SimpleString@Py_3.11"):
        assert native_symbols.python_code_entry(name), name
    assert [n for n in PYBIND_ENTRIES if native_symbols.python_code_entry(n)] == []


@pytest.mark.skipif(CXX is None or shutil.which("nm") is None, reason="needs a C++ compiler and nm")
def test_a_library_linking_them_is_found(tmp_path):
    src = tmp_path / "lib.cpp"
    src.write_text('extern "C" { int Py_AddPendingCall(int (*)(void*), void*); int PyRun_SimpleStringFlags(const char*, '
                   'void*); int PyGILState_Ensure(void); }\n'
                   'static int later(void*) { return PyRun_SimpleStringFlags("pass", 0); }\n'
                   'extern "C" int go() { PyGILState_Ensure(); return Py_AddPendingCall(later, 0); }\n')
    subprocess.run([CXX, "-shared", "-fPIC", "-o", str(tmp_path / "lib.so"), str(src)], check=True)
    found, _ = native_symbols.findings(tmp_path, ops=frozenset())
    assert [f.code for f in found] == ["sandbox-introspect"], found
    assert "Py_AddPendingCall" in found[0].message and "PyRun_SimpleStringFlags" in found[0].message
    assert "PyGILState_Ensure" not in found[0].message


@pytest.fixture(scope="module")
def opts(build_cache):
    # call_counts=False: these candidates count their calls to tamper on the checked ones; the static
    # call-count finding (call_state.py) would reject them before the native watches are reached.
    return VerifyOptions(cpu_only=True, timeout_s=300, time_compile=False, call_counts=False,
                         extra_env={"STITCHCUDA_CACHE": str(build_cache)})


# (candidate, a message of the check built for its route)
ROUTES = [
    ("hack_capi_pending_tamper", "links Python's C API to run or schedule code"),
    ("hack_capi_pending_tamper", "compile source of its own"),  # PyRun compiling, the trampoline the first caller
    ("hack_capi_gc_in_call", "list every object in the process"),  # asked with the trampoline the first caller
    ("hack_capi_dlsym_run", "looked up Python's C API by name (dlsym)"),
]


@pytest.mark.parametrize("stem,message", ROUTES, ids=[f"{s}-{m.split()[0]}" for s, m in ROUTES])
def test_the_tolerance_loosened_from_native_code_is_a_hack(tmp_path, opts, stem, message):
    if stem == "hack_capi_dlsym_run" and native_threads.library(tmp_path / "probe") is None:
        pytest.skip("no C compiler for the preloaded watch")
    v = verify(hack_task("ref_matmul_bigk"), hack_candidate(stem, kernels="capi_tamper.cpp"), tmp_path / "v", opts)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    assert any(f.code == "sandbox-introspect" and message in f.message for f in v.hack_findings), \
        [(f.code, f.message[:160]) for f in v.hack_findings]
