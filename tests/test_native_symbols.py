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
