"""PyTorch's kernels called from native code below the dispatcher (agents/verify/native_symbols.py):
a library's undefined symbols naming an ATen operator in a kernel namespace (at::cpu::add) are a
hack finding; at::cuda's utilities and calls through the dispatcher (at::_ops) are not. Built here
with the system's C++ compiler: the symbols are what matters, not linking against torch."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from stitchcuda.agents.verify import native_symbols

CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None or shutil.which("nm") is None, reason="needs a C++ compiler and nm")

SOURCE = """
namespace at {
struct Tensor {};
namespace cpu { Tensor add(const Tensor&, const Tensor&); }
namespace native { Tensor my_kernel(const Tensor&); }
namespace cuda { int getCurrentCUDAStream(int); Tensor mm(const Tensor&, const Tensor&); }
namespace _ops { struct add_Tensor { static Tensor call(const Tensor&, const Tensor&); }; }
}
extern "C" int forward_all(int which) {
  at::Tensor a, b;
  if (which == 0) at::cpu::add(a, b);
  if (which == 1) at::native::my_kernel(a);
  if (which == 2) at::cuda::mm(a, b);
  if (which == 3) at::_ops::add_Tensor::call(a, b);
  return at::cuda::getCurrentCUDAStream(0);
}
"""

CLEAN = """
namespace at { struct Tensor {}; namespace cuda { int getCurrentCUDAStream(int); }
namespace _ops { struct add_Tensor { static Tensor call(const Tensor&, const Tensor&); }; } }
extern "C" int forward_all() { at::Tensor a; at::_ops::add_Tensor::call(a, a); return at::cuda::getCurrentCUDAStream(0); }
"""


def _build(folder, name, source):
    src = folder / f"{name}.cpp"
    src.write_text(source)
    subprocess.run([CXX, "-shared", "-fPIC", "-o", str(folder / f"{name}.so"), str(src)], check=True)


def test_kernels_below_the_dispatcher_are_found(tmp_path):
    (tmp_path / "build").mkdir()
    _build(tmp_path / "build", "cheat", SOURCE)
    found, note = native_symbols.findings(tmp_path, ops=frozenset({"add", "mm"}))
    assert not note
    (f,) = found
    assert f.code == "torch-kernel-in-native-code"
    for call in ("at::cpu::add", "at::native::my_kernel", "at::cuda::mm"):
        assert call in f.message
    assert "getCurrentCUDAStream" not in f.message and "_ops" not in f.message


def test_utilities_and_dispatched_calls_pass(tmp_path):
    _build(tmp_path, "clean", CLEAN)
    assert native_symbols.findings(tmp_path, ops=native_symbols.operator_names()) == ([], "")


OUT_FORMS = """
namespace at { struct Tensor {};
namespace cpu { Tensor& add_out(Tensor&, const Tensor&, const Tensor&); Tensor& clamp_min_outf(const Tensor&, Tensor&);
                Tensor mm_symint(const Tensor&, const Tensor&); Tensor& layout_out(Tensor&); } }
extern "C" int forward_all() {
  at::Tensor a, b;
  at::cpu::add_out(a, a, b); at::cpu::clamp_min_outf(a, b); at::cpu::mm_symint(a, b); at::cpu::layout_out(a);
  return 0;
}
"""


def test_an_operators_out_and_symint_forms_are_kernels_too(tmp_path):
    """at::cpu::add_out, clamp_min_outf, mm_symint: an operator's C++ forms (a red-team review,
    2026-12-01, had a library linking the _out forms accepted). A name that is no operator once the
    suffix is gone (layout_out) stays no kernel."""
    _build(tmp_path, "forms", OUT_FORMS)
    found, _ = native_symbols.findings(tmp_path, ops=frozenset({"add", "clamp_min", "mm"}))
    (f,) = found
    for call in ("at::cpu::add_out", "at::cpu::clamp_min_outf", "at::cpu::mm_symint"):
        assert call in f.message
    assert "layout_out" not in f.message
    assert native_symbols.kernel_of_mangled("_ZN2at3cpu7add_outERNS_6TensorERKS1_S4_", frozenset({"add"})) == \
        "at::cpu::add_out"


def test_the_operator_names_are_atens():
    ops = native_symbols.operator_names()
    assert {"add", "mm", "_softmax", "convolution"} <= ops and "getCurrentCUDAStream" not in ops


@pytest.mark.skipif(os.environ.get("STITCHCUDA_SLOW_TESTS") != "1",
                    reason="builds against torch's headers (~60 s); set STITCHCUDA_SLOW_TESTS=1")
def test_a_load_inline_candidate_calling_at_cpu_is_rejected(tmp_path, build_cache):
    """The red-team's candidate end to end: at::cpu::add and clamp_min from a load_inline extension,
    accepted by every dynamic check before (no dispatch, no profiler event)."""
    from conftest import hack_candidate, hack_task

    from stitchcuda.agents.verify.verifier import VerifyOptions, verify

    opts = VerifyOptions(cpu_only=True, timeout_s=600, time_compile=False,
                         extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task("ref_affine"), hack_candidate("hack_aten_below_dispatcher"), tmp_path, opts)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    f = next(f for f in v.hack_findings if f.code == "torch-kernel-in-native-code")
    assert "at::cpu::add" in f.message and "at::cpu::clamp_min" in f.message


def test_the_mangled_names_a_library_looks_up_are_read_as_nm_reads_symbols():
    ops = native_symbols.operator_names()
    read = {s: native_symbols.kernel_of_mangled(s, ops) for s in (
        "_ZN2at3cpu3addERKNS_6TensorES3_RKN3c106ScalarE", "_ZN2at6native10clamp_min_ERNS_6TensorE",
        "_ZN2at4cuda2mmERKNS_6TensorES3_", "_ZN2at4cuda20getCurrentCUDAStreamEa", "_ZN2at6TensorC1Ev", "cos")}
    assert read == {"_ZN2at3cpu3addERKNS_6TensorES3_RKN3c106ScalarE": "at::cpu::add",
                    "_ZN2at6native10clamp_min_ERNS_6TensorE": "at::native::clamp_min_",
                    "_ZN2at4cuda2mmERKNS_6TensorES3_": "at::cuda::mm",
                    "_ZN2at4cuda20getCurrentCUDAStreamEa": None, "_ZN2at6TensorC1Ev": None, "cos": None}


def test_a_kernel_looked_up_by_a_computed_name_is_found(tmp_path, build_cache):
    """A red-team candidate (2026-11-30) found at::cpu::add by dlopen + dlsym of a name built at run
    time: no undefined symbol, no string in its source. The worker's preloaded watch keeps every
    ATen name looked up by dlsym."""
    from conftest import hack_candidate, hack_task

    from stitchcuda.agents.verify import native_threads
    from stitchcuda.agents.verify.verifier import VerifyOptions, verify

    if native_threads.library(tmp_path / "probe") is None:
        pytest.skip("no C compiler for the preloaded watch")
    opts = VerifyOptions(cpu_only=True, timeout_s=180, time_compile=False,
                         extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task("ref_affine"), hack_candidate("hack_dlsym_aten", kernels="kernels_dlsym.cpp"), tmp_path / "v",
               opts)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    f = next(f for f in v.hack_findings if f.code == "torch-kernel-in-native-code")
    assert "at::cpu::add" in f.message and "dlsym" in f.message


def test_a_redispatch_looked_up_by_a_computed_name_is_found(tmp_path, build_cache):
    """at::_ops::mm_out::redispatch runs PyTorch's mm below the dispatch key it is handed, past the
    op recorder and the profiler; a red-team library (2026-12-02) found it by dlsym of a name built
    from pieces and did a linear layer's product with it. The preloaded watch keeps redispatch names."""
    from conftest import hack_candidate, hack_task

    from stitchcuda.agents.verify import native_threads
    from stitchcuda.agents.verify.verifier import VerifyOptions, verify

    if native_threads.library(tmp_path / "probe") is None:
        pytest.skip("no C compiler for the preloaded watch")
    opts = VerifyOptions(cpu_only=True, timeout_s=180, time_compile=False,
                         extra_env={"STITCHCUDA_CACHE": str(build_cache)})
    v = verify(hack_task("ref_linear"), hack_candidate("hack_native_redispatch", kernels="kernels_redispatch.cpp"),
               tmp_path / "v", opts)
    assert v.status == "hacked" and not v.accepted, (v.status, v.message)
    f = next(f for f in v.hack_findings if f.code == "hidden-dispatch")
    assert "at::_ops::mm_out::redispatch" in f.message and "dlsym" in f.message


REDISPATCH = """
namespace c10 { struct DispatchKeySet { unsigned long long repr; }; }
namespace at { struct Tensor { void* impl; };
  namespace _ops { struct mm_out { static Tensor& redispatch(c10::DispatchKeySet, const Tensor&, const Tensor&, Tensor&); }; } }
extern "C" void product(void* a, void* b, void* out) {
  at::_ops::mm_out::redispatch(c10::DispatchKeySet{1}, *(at::Tensor*)a, *(at::Tensor*)b, *(at::Tensor*)out);
}
"""


def test_a_library_linking_a_redispatch_is_found(tmp_path):
    """The same entry linked, not looked up: its undefined symbol names it."""
    _build(tmp_path, "product", REDISPATCH)
    found, _ = native_symbols.findings(tmp_path, ops=frozenset())
    assert [f.code for f in found] == ["hidden-dispatch"] and "at::_ops::mm_out::redispatch" in found[0].message
    mangled = "_ZN2at4_ops6mm_out10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_RS4_"
    assert native_symbols.redispatch_of_mangled(mangled) == "at::_ops::mm_out::redispatch"
    assert native_symbols.redispatch_of_mangled("_ZN2at4_ops6mm_out4callERKNS_6TensorES4_RS2_") is None


SWITCH = """
namespace at { void enableRecordFunction(bool); }
extern "C" void quiet() { at::enableRecordFunction(false); }
"""


def test_a_library_that_switches_the_op_recording_off_is_found(tmp_path):
    """at::enableRecordFunction(false) hides every op from the profiler's recording on that thread, as
    the Python switch did in a red-team candidate (2026-12-01): a library calling it is a finding, and
    so is its mangled name looked up by dlsym."""
    _build(tmp_path, "quiet", SWITCH)
    found, _ = native_symbols.findings(tmp_path, ops=frozenset())
    assert [f.code for f in found] == ["hidden-dispatch"] and "at::enableRecordFunction" in found[0].message
    assert native_symbols.switch_of_mangled("_ZN2at20enableRecordFunctionEb") == "at::enableRecordFunction"
    assert native_symbols.switch_of_mangled("_ZN2at3cpu3addERKNS_6TensorE") is None


TABLES = """
namespace c10 { struct OperatorHandle { void callBoxedSlow() const; }; struct DispatchKey {};
  struct Dispatcher { static Dispatcher& realSingleton(); OperatorHandle findSchemaOrThrow(const char*, const char*); };
  namespace impl { struct OperatorEntry { const void* kernelForDispatchKey(DispatchKey) const; }; }
  const char* toString(DispatchKey); }
namespace torch { struct Library { void* _impl(const char*, int); }; }
extern "C" void through_tables(void* lib, void* entry) {
  c10::Dispatcher::realSingleton().findSchemaOrThrow("aten::addmm", "").callBoxedSlow();
  ((c10::impl::OperatorEntry*)entry)->kernelForDispatchKey(c10::DispatchKey{});
  ((torch::Library*)lib)->_impl("addmm", 0);
}
extern "C" const char* key_name() { return c10::toString(c10::DispatchKey{}); }
"""


def test_a_library_reaching_the_dispatchers_tables_is_found(tmp_path):
    """findSchemaOrThrow + callBoxedForDispatchKey (aten::addmm's CPU kernel, below the Python key) and
    torch::Library::_impl (a kernel of the candidate's registered for ATen's operator): red team round
    5, 2026-12-05. A function that only takes a DispatchKey (c10::toString) is no entry to them."""
    _build(tmp_path, "tables", TABLES)
    found, _ = native_symbols.findings(tmp_path, ops=frozenset())
    assert [f.code for f in found] == ["hidden-dispatch"], found
    for name in ("c10::Dispatcher::findSchemaOrThrow", "c10::Dispatcher::realSingleton",
                 "c10::impl::OperatorEntry::kernelForDispatchKey", "torch::Library::_impl"):
        assert name in found[0].message, found[0].message
    assert "toString" not in found[0].message
    assert native_symbols.dispatcher_of_mangled(
        "_ZNK3c104impl13OperatorEntry20kernelForDispatchKeyENS_11DispatchKeyE") == \
        "c10::impl::OperatorEntry::kernelForDispatchKey"
    assert native_symbols.dispatcher_of_mangled("_ZN5torch7Library5_implEPKcONS_11CppFunctionE") == "torch::Library::_impl"
    assert native_symbols.dispatcher_of_mangled("_ZN2at4_ops6mm_out4callERKNS_6TensorES4_RS2_") is None
    assert native_symbols.dispatcher_entry("                 U c10::toString(c10::DispatchKey)") is None
