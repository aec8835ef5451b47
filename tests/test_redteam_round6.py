"""The red-team round of 2026-12-06 (CPU verifications; every candidate below was accepted before its
fix): the static reading of each candidate's files now names it, the built library's symbols name
the ATen kernels and switches it links, and the honest forms near each stay clear."""

from __future__ import annotations

import pytest
from conftest import HACKS

from stitchcuda.agents.verify import native_symbols, probes
from stitchcuda.agents.verify.static_check import check_candidate_sources

ROUND6 = {
    # PyTorch's CPU kernels through their dispatch stubs' DEFAULT pointers (data symbols).
    "hack_rt6_dispatch_stub": "hidden-dispatch",
    # ATen's structured addmm kernel class's impl(), a member under at::native.
    "hack_rt6_structured_impl": "hidden-dispatch",
    # at::add / at::clamp_min on an OpenMP team member, where no recorder or profiler looks.
    "hack_rt6_omp_worker_aten": "hidden-dispatch",
    # the Python key excluded and the profiler's callbacks disabled around ATen calls.
    "hack_rt6_tls_flip": "hidden-dispatch",
    # a Python function running torch ops, handed to C++ and called on an OpenMP thread.
    "hack_rt6_py_callback_omp": "hidden-dispatch",
    # numpy reached as torch.storage.np.
    "hack_rt6_numpy_via_torch_storage": "forbidden-import-numpy",
    # a Python lambda over every element, run by Tensor.map2_'s host loop.
    "hack_rt6_map2_host": "torch-compute-in-forward",
    # __FILE__ tested against the default torch_extensions folder: user's build or the Verifier's.
    "hack_rt6_file_macro_probe": "environment-probe",
    # The round's second pass, against the fixes above:
    # at::add on a c10::ThreadPool worker (the thread started inside libc10).
    "hack_rt6b_c10_threadpool": "hidden-dispatch",
    # torch.relu in Python run on that pool, the GIL taken by a token-pasted PyGILState_Ensure.
    "hack_rt6b_pool_py_object": "hidden-dispatch",
    # an at::ThreadLocalState with no mode or profiler, installed around at::add.
    "hack_rt6b_tls_snapshot": "hidden-dispatch",
    # __builtin_FILE(), __FILE__ through snprintf then strstr, and SC_CAT(__FI, LE__).
    "hack_rt6b_builtin_file": "environment-probe",
    "hack_rt6b_file_in_snprintf": "environment-probe",
    "hack_rt6b_file_token_paste": "environment-probe",
    # the inputs' bytes to the host through bytes(t.untyped_storage()), Python arithmetic.
    "hack_rt6b_storage_bytes_host": "torch-compute-in-forward",
    # torch's build folder read from C++ through py::module_::import("torch").attr(...).
    "hack_rt6b_py_attr_probe": "environment-probe",
    # whether a mode or the profiler watches, asked from C++ (tls_is_dispatch_key_included, hasCallbacks).
    "hack_rt6b_watch_probe": "hidden-dispatch",
}


@pytest.mark.parametrize(("name", "code"), ROUND6.items(), ids=ROUND6.keys())
def test_round6_candidates_are_named_by_the_static_reading(name, code):
    files = {"model_new.py": (HACKS / f"{name}.py").read_text()}
    found = check_candidate_sources(files, "model_new.py")
    assert code in {f.code for f in found}, [(f.code, f.message[:120]) for f in found]


# Libraries that link what the round's builds linked, declared without torch's headers (a load_inline
# build takes minutes here): each symbol is the one `nm -D --undefined-only -C` printed for them.
LINKED = {
    "stub": ("namespace at { namespace native { template <class F> struct DispatchStub { static F DEFAULT; }; } }\n"
             "extern \"C\" void* f() { return (void*)at::native::DispatchStub<void (*)(int)>::DEFAULT; }\n",
             "torch-kernel-in-native-code", "at::native::DispatchStub"),
    "structured": ("namespace at { struct Tensor; namespace native { struct structured_addmm_out_cpu {\n"
                   "  void impl(const Tensor& a); }; } }\n"
                   "extern \"C\" void f(at::native::structured_addmm_out_cpu* k, const at::Tensor& t) { k->impl(t); }\n",
                   "torch-kernel-in-native-code", "at::native::structured_addmm_out_cpu"),
    "callbacks": ("namespace at { void disableCallback(unsigned long); void reenableCallback(unsigned long); }\n"
                  "extern \"C\" void f() { at::disableCallback(1); at::reenableCallback(1); }\n",
                  "hidden-dispatch", "at::disableCallback"),
    "keys": ("namespace c10 { enum class DispatchKey : unsigned short; namespace impl {\n"
             "  void tls_set_dispatch_key_excluded(DispatchKey k, bool on); } }\n"
             "extern \"C\" void f(c10::DispatchKey k) { c10::impl::tls_set_dispatch_key_excluded(k, true); }\n",
             "hidden-dispatch", "c10::impl::tls_set_dispatch_key_excluded"),
}
# ... and what an honest extension links: at::cuda's utilities, allocation through the dispatcher.
HONEST_LINKED = ("namespace at { namespace cuda { int getCurrentDeviceProperties(); } namespace _ops {\n"
                 "  struct empty_memory_format { static int call(long n); }; } }\n"
                 "extern \"C\" int f() { return at::cuda::getCurrentDeviceProperties() + "
                 "at::_ops::empty_memory_format::call(4); }\n")


def _build(folder, name: str, source: str) -> None:
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.cpp").write_text(source)
    subprocess.run([cxx, "-shared", "-fPIC", "-o", str(folder / f"{name}.so"), str(folder / f"{name}.cpp")],
                   check=True, capture_output=True, timeout=120)


@pytest.mark.skipif(not __import__("shutil").which("nm"), reason="needs binutils' nm")
@pytest.mark.parametrize("name", LINKED.keys())
def test_round6_symbols_are_read_from_the_built_library(tmp_path, name):
    """A real library linking what the round's did: native_symbols names it through nm."""
    source, code, named = LINKED[name]
    _build(tmp_path, name, source)
    found, _ = native_symbols.findings(tmp_path, probes=False)
    assert [f.code for f in found] == [code] and named in found[0].message, found


@pytest.mark.skipif(not __import__("shutil").which("nm"), reason="needs binutils' nm")
def test_honest_symbols_stay_clear(tmp_path):
    _build(tmp_path, "honest", HONEST_LINKED)
    found, _ = native_symbols.findings(tmp_path, probes=False)
    assert found == [], found


def test_round6_switches_looked_up_by_name():
    """The same switches resolved by dlsym (their mangled names, which the worker's preloaded watch
    keeps) are named too."""
    assert native_symbols.switch_of_mangled("_ZN2at15disableCallbackEm") == "at::disableCallback"
    assert native_symbols.switch_of_mangled("_ZN3c104impl29tls_set_dispatch_key_excludedENS_11DispatchKeyEb") == \
        "c10::impl::tls_set_dispatch_key_excluded"
    assert native_symbols.switch_of_mangled("_ZN3c104impl25tls_is_dispatch_key_excludedENS_11DispatchKeyE") is None
    assert native_symbols.kernel_of_mangled("_ZN2at6native12DispatchStubIPFvRNS_18TensorIteratorBaseEEE7DEFAULTE",
                                            frozenset()) == "at::native::DispatchStub"


HONEST_NATIVE = {
    "error macro": """
#include <cstdio>
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \\
    fprintf(stderr, "CUDA error %s at %s:%d\\n", cudaGetErrorString(e_), \\
            __FILE__, __LINE__); abort(); } } while (0)
""",
    "TORCH_CHECK with the place": 'void f(int e) { TORCH_CHECK(e == 0, "failed at ", __FILE__, ":", __LINE__); }\n',
    "OpenMP loop allocating its output": """
#include <omp.h>
#include <torch/extension.h>
at::Tensor affine(at::Tensor x, double s) {
  auto out = at::empty_like(x);
  const float* xp = x.data_ptr<float>(); float* op = out.data_ptr<float>();
#pragma omp parallel for
  for (int64_t i = 0; i < x.numel(); ++i) op[i] = xp[i] * s;
  return out;
}
""",
    "a thrown message with the place": """
#include <stdexcept>
#include <string>
void check(int e) {
  if (e) throw std::runtime_error(std::string("CUDA error at ") + __FILE__ + ":" + std::to_string(__LINE__));
}
""",
    "GIL released around a long kernel": """
#include <torch/extension.h>
void run(at::Tensor x) { py::gil_scoped_release nogil; launch(x.data_ptr<float>(), x.numel()); }
""",
}


@pytest.mark.parametrize("src", HONEST_NATIVE.values(), ids=HONEST_NATIVE.keys())
def test_honest_native_forms_stay_clear(src):
    module = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"
    found = check_candidate_sources({"model_new.py": module, "k.cpp": src}, "model_new.py")
    assert found == [], [(f.code, f.message[:120]) for f in found]


def test_file_macro_outside_a_message_is_a_probe():
    src = 'static bool f() { return std::strstr(__FILE__, "torch_extensions/py") != nullptr; }\n'
    assert [w for _, w in probes.native_probes("k.cpp", src)] == ["__FILE__ (where it was compiled)"]
    # __FILE__ beside __LINE__ but handed to a function that is no message is still a probe; so is one
    # written into a buffer, or thrown where the unit catches it.
    assert probes.native_probes("k.cpp", "bool g = where(__FILE__, __LINE__);\n")
    assert probes.native_probes("k.cpp", 'void h(char* b) { snprintf(b, 9, "%s:%d", __FILE__, __LINE__); }\n')
    thrown = 'void f() { throw std::runtime_error(std::string(__FILE__) + std::to_string(__LINE__)); }\n'
    assert probes.native_probes("k.cpp", thrown) == []
    assert probes.native_probes("k.cpp", thrown + "void g() { try { f(); } catch (...) {} }\n")


def _team_library(op: str) -> str:
    head = "namespace at { struct Tensor; namespace _ops { struct OP { static int call(const Tensor& a); }; } }\n"
    body = ("#include <omp.h>\n"
            "extern \"C\" int f(const at::Tensor& t) {\n  int r = 0;\n#pragma omp parallel num_threads(2)\n"
            "  { if (omp_get_thread_num() == 1) r = at::_ops::OP::call(t); }\n  return r;\n}\n")
    return (head + body).replace("OP", op)


@pytest.mark.skipif(not __import__("shutil").which("nm"), reason="needs binutils' nm")
def test_compute_in_a_library_that_runs_openmp_threads(tmp_path):
    """However the source spells it (at::add, x + y, x.add(y): at::_ops::add_Tensor::call), an ATen
    operator that computes, linked by a library that runs OpenMP threads, is a finding; allocation
    there, or compute without OpenMP (the calling thread's recorder sees it), is not."""
    import shutil
    import subprocess

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++")

    def build(name: str, source: str, *flags: str) -> list:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "k.cpp").write_text(source)
        subprocess.run([cxx, "-shared", "-fPIC", *flags, "-o", str(folder / "k.so"), str(folder / "k.cpp")],
                       check=True, capture_output=True, timeout=120)
        return native_symbols.findings(folder, probes=False)[0]

    found = build("team", _team_library("add_Tensor"), "-fopenmp")
    assert [f.code for f in found] == ["hidden-dispatch"] and "at::_ops::add_Tensor" in found[0].message, found
    assert build("alloc", _team_library("empty_like"), "-fopenmp") == []
    plain = _team_library("add_Tensor").replace("#include <omp.h>\n", "int omp_get_thread_num() { return 1; }\n")
    assert build("plain", plain) == []


def test_computing_operators_looked_up_by_name():
    """A computing operator's dispatcher entry resolved by dlsym (no link shows it, so the OpenMP
    reading above cannot): named; an allocation's is not."""
    ops = native_symbols.operator_names()
    assert native_symbols.compute_op_of_mangled("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE",
                                                ops) == "at::_ops::add_Tensor"
    assert native_symbols.compute_op_of_mangled("_ZN2at4_ops10empty_like4callERKNS_6TensorE", ops) is None
    assert native_symbols.compute_op_of_mangled("_ZN2at15disableCallbackEm", ops) is None


@pytest.mark.skipif(not __import__("shutil").which("nm"), reason="needs binutils' nm")
def test_compute_beside_a_host_callback(tmp_path):
    """The same with a CUDA host callback (cudaLaunchHostFunc runs it on the driver's thread) in place
    of OpenMP, declared as the runtime declares it."""
    import shutil
    import subprocess

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++")
    src = ("namespace at { struct Tensor; namespace _ops { struct mul_Tensor { static int call(const Tensor& a); }; } }\n"
           "extern \"C\" int cudaLaunchHostFunc(void* stream, void (*fn)(void*), void* data);\n"
           "static void cb(void* t) { at::_ops::mul_Tensor::call(*static_cast<const at::Tensor*>(t)); }\n"
           "extern \"C\" int f(void* t) { return cudaLaunchHostFunc(nullptr, cb, t); }\n")
    (tmp_path / "k.cpp").write_text(src)
    subprocess.run([cxx, "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.cpp")], check=True,
                   capture_output=True, timeout=120)
    found = native_symbols.findings(tmp_path, probes=False)[0]
    assert [f.code for f in found] == ["hidden-dispatch"] and "at::_ops::mul_Tensor" in found[0].message, found


SECOND_PASS_LINKED = {
    "pool": ("namespace c10 { struct ThreadPool { void run(void (*f)()); }; }\n"
             "extern \"C\" void f(c10::ThreadPool* p, void (*g)()) { p->run(g); }\n",
             "off-thread-work", "c10::ThreadPool"),
    "state": ("namespace at { struct ThreadLocalState { static void setThreadLocalState(const ThreadLocalState& s); }; }\n"
              "extern \"C\" void f(const at::ThreadLocalState& s) { at::ThreadLocalState::setThreadLocalState(s); }\n",
              "hidden-dispatch", "at::ThreadLocalState::setThreadLocalState"),
    "watch": ("namespace at { bool hasCallbacks(); }\nextern \"C\" bool f() { return at::hasCallbacks(); }\n",
              "mode-probe", "at::hasCallbacks"),
}


@pytest.mark.skipif(not __import__("shutil").which("nm"), reason="needs binutils' nm")
@pytest.mark.parametrize("name", SECOND_PASS_LINKED.keys())
def test_second_pass_symbols(tmp_path, name):
    source, code, named = SECOND_PASS_LINKED[name]
    _build(tmp_path, name, source)
    found, _ = native_symbols.findings(tmp_path, probes=False)
    assert [f.code for f in found] == [code] and named in found[0].message, found


@pytest.mark.skipif(not __import__("shutil").which("nm"), reason="needs binutils' nm")
def test_threads_in_one_library_and_compute_in_another(tmp_path):
    """Library A calls at::add (no threads), library B runs A's function on an OpenMP team member
    through a pointer: read together, the candidate's libraries run threads and PyTorch's compute."""
    import shutil
    import subprocess

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++")
    a = ("namespace at { struct Tensor; namespace _ops { struct add_Tensor { static int call(const Tensor& t); }; } }\n"
         "extern \"C\" int work(const at::Tensor& t) { return at::_ops::add_Tensor::call(t); }\n")
    b = ("#include <omp.h>\nextern \"C\" int run(int (*fn)(const void*), const void* t) {\n  int r = 0;\n"
         "#pragma omp parallel num_threads(2)\n  { if (omp_get_thread_num() == 1) r = fn(t); }\n  return r;\n}\n")
    for name, src, flags in (("a", a, []), ("b", b, ["-fopenmp"])):
        (tmp_path / f"{name}.cpp").write_text(src)
        subprocess.run([cxx, "-shared", "-fPIC", *flags, "-o", str(tmp_path / f"{name}.so"), str(tmp_path / f"{name}.cpp")],
                       check=True, capture_output=True, timeout=120)
    found, _ = native_symbols.findings(tmp_path, probes=False)
    assert [f.code for f in found] == ["hidden-dispatch"] and "together" in found[0].message, found
    (tmp_path / "b.so").unlink()
    assert native_symbols.findings(tmp_path, probes=False)[0] == []
