"""What a candidate's own machine code calls (agents/verify/native_calls.py): a probe whose name no
source line spells (pasted by a macro, taken as a pointer) still compiles to a call of libc's getenv
or a load of environ's address, which the library's disassembly shows function by function. The static
CUDA runtime nvcc links in reads the environment and files itself: its functions, told apart by the
toolkit's archives, are not the candidate's.

Real compilers (g++ here and in CI; nvcc where installed), real objdump and nm, the real Verifier."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import HACKS, hack_candidate, hack_task

from stitchcuda import runtime
from stitchcuda.agents.verify import native_calls, probes
from stitchcuda.agents.verify.verifier import VerifyOptions, verify

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("nm") is None,
                                reason="binutils' objdump and nm are not installed")

ASKS = """#include <cstdint>
#include <cstdlib>
#define JOIN(a, b) a##b
extern "C" int k(const float* x, float* y, int64_t n, void*) {
  float s = JOIN(get, env)("HOME") ? 2.f : 0.f;
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  return 0;
}
"""
POINTER = """#include <cstdint>
#include <unistd.h>
extern "C" int k(const float* x, float* y, int64_t n, void*) {
  char** volatile e = JOIN_ENV;
  for (int64_t i = 0; i < n; ++i) y[i] = e ? x[i] : 0.f;
  return 0;
}
"""
HONEST = """#include <chrono>
#include <cstdint>
extern "C" int k(const float* x, float* y, int64_t n, void*) {
  auto t0 = std::chrono::steady_clock::now();  // (times contenders, as generated convolutions do)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.f;
  return (int)(std::chrono::steady_clock::now() - t0).count() * 0;
}
"""


def _built(tmp_path: Path, name: str, text: str) -> Path:
    src = tmp_path / name
    src.write_text(text)
    return runtime.build([src]).library


def test_a_pasted_name_is_read_from_the_machine_code(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    assert probes.native_probes("k.cpp", ASKS) == []  # the text names nothing
    calls, note = native_calls.probe_calls(_built(tmp_path, "asks.cpp", ASKS))
    assert note == "" and calls == {"k": {"getenv"}}, (calls, note)


def test_an_address_taken_is_read_as_a_call(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    text = POINTER.replace("JOIN_ENV", "__environ")
    calls, _ = native_calls.probe_calls(_built(tmp_path, "pointer.cpp", text))
    assert calls == {"k": {"__environ"}}, calls


RAW = """#include <cstdint>
extern "C" int k(const float* x, float* y, int64_t n, void*) {
  long r;
  asm volatile(
      "mov $39, %%eax\\n\\t"
      "sys" "call"
      : "=a"(r) : : "rcx", "r11", "memory");
  for (int64_t i = 0; i < n; ++i) y[i] = r > 0 ? x[i] : 0.f;
  return 0;
}
"""


HIDDEN = """#include <cstdint>
#include <cstdlib>
#define JOIN(a, b) a##b
typedef char* (*fn)(const char*);
fn tbl[] = {&JOIN(get, env)};
__attribute__((section("hot_kernels"), noinline)) float ask() { return JOIN(get, env)("HOME") ? 2.f : 0.f; }
extern "C" int k(const float* x, float* y, int64_t n, void*) {
  float s = tbl[0]("HOME") ? ask() : 0.f;
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  return 0;
}
"""


def test_a_function_in_a_section_of_its_own_and_a_table_of_pointers_are_read(tmp_path, monkeypatch):
    """A review's routes past the first version (2026-12-05): a function placed in a section other
    than .text was never disassembled, and a probe's address in a table of function pointers is a
    relocation of the data, which no instruction shows."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    calls, _ = native_calls.probe_calls(_built(tmp_path, "hidden.cpp", HIDDEN))
    assert calls.get("_Z3askv") == {"getenv"}, calls
    assert calls.get("(a pointer in its data)") == {"getenv"}, calls


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 assembly")
def test_a_raw_system_call_split_over_lines_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    assert probes.native_probes("k.cpp", RAW) == []  # (no line holds asm and syscall together)
    calls, _ = native_calls.probe_calls(_built(tmp_path, "raw.cpp", RAW))
    assert calls == {"k": {"syscall"}}, calls


def test_honest_code_calls_nothing_it_should_not(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    calls, note = native_calls.probe_calls(_built(tmp_path, "honest.cpp", HONEST))
    assert calls == {} and note == "", (calls, note)
    calls, _ = native_calls.probe_calls(runtime.load(HACKS / "kernels.cpp").path)
    assert calls == {}, calls


@pytest.mark.skipif(runtime.find_nvcc() is None, reason="nvcc is not installed")
def test_the_static_cuda_runtime_is_not_the_candidates(tmp_path, monkeypatch):
    """nvcc's library carries libcudart_static, whose functions import getenv, fopen and more: only the
    candidate's own launcher is named, and an honest one not at all."""
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    kernel = ("__global__ void twice(const float* x, float* y, int64_t n) {\n"
              "  int64_t i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = 2.f * x[i]; }\n")
    launch = ("extern \"C\" int k(const float* x, float* y, int64_t n, void* s) {\n  ASK\n"
              "  twice<<<(n + 255) / 256, 256, 0, (cudaStream_t)s>>>(x, y, n);\n  return (int)cudaGetLastError();\n}\n")
    head = "#include <cuda_runtime.h>\n#include <cstdint>\n#include <cstdlib>\n#define JOIN(a, b) a##b\n"
    lib = _built(tmp_path, "asks.cu", head + kernel + launch.replace("ASK", 'if (JOIN(get, env)("HOME")) n = 0;'))
    assert native_symbols_imports(lib) >= {"getenv", "fopen"}  # (the runtime's own)
    calls, note = native_calls.probe_calls(lib)
    assert note == "" and calls == {"k": {"getenv"}}, (calls, note)
    calls, note = native_calls.probe_calls(_built(tmp_path, "honest.cu", head + kernel + launch.replace("ASK", "")))
    assert calls == {} and note == "", (calls, note)


def native_symbols_imports(lib: Path) -> set[str]:
    from stitchcuda.agents.verify import native_symbols

    return {line.split()[-1].split("@")[0] for line in native_symbols.undefined_symbols(lib) or [] if line.split()}


def test_a_pasted_probe_is_rejected_by_the_verifier(tmp_path, build_cache):
    """Works under the checks (the Verifier's processes have STITCHCUDA_CACHE), writes nothing
    elsewhere; its sources name nothing a text reading of them as written sees. Since 2026-12-06 the
    sources are also read with their own macros expanded (static_check._expanded), which names the
    pasted call too; the library's reading names it either way."""
    opts = VerifyOptions(extra_env={"STITCHCUDA_CACHE": str(build_cache)}, cpu_only=True, timeout_s=240.0,
                         time_compile=False)
    cand = hack_candidate("hack_native_pasted_probe", **{"pasted_kernels.cpp": (HACKS / "pasted_kernels.cpp").read_text()})
    v = verify(hack_task("ref_affine"), cand, tmp_path / "v", opts)
    assert not v.accepted and v.status == "hacked", (v.status, v.message)
    probe = [f for f in v.hack_findings if f.code == "environment-probe" and f.file is None]  # (the library's)
    assert probe, v.hack_findings
    assert "getenv" in probe[0].message and "affine_relu_asked" in probe[0].message, probe[0].message
    expanded = [f for f in v.hack_findings if f.code == "environment-probe" and f.file == "pasted_kernels.cpp"]
    assert expanded and "getenv" in expanded[0].message, v.hack_findings
    assert v.checks and all(c["ok"] for c in v.checks), v.checks
