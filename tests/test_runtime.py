"""The build path every candidate takes: nvcc into a cached .so, called through ctypes."""

import time

import pytest
import torch

from stitchcuda import runtime

KERNEL = r"""
#include <cuda_runtime.h>
#include <cstdint>
__global__ void axpy(const float* x, float* y, float a, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] += a * x[i];
}
extern "C" int launch_axpy(const float* x, float* y, double a, int64_t n, cudaStream_t s) {
  axpy<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, y, (float)a, n);
  return (int)cudaGetLastError();
}
"""


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.nvcc
@pytest.mark.skipif(runtime.find_nvcc() is None, reason="nvcc is not installed")
def test_nvcc_build_is_cached_by_content(cache):
    src = cache / "k.cu"
    src.write_text(KERNEL)
    t0 = time.perf_counter()
    first = runtime.build([src], arch="sm_90")
    assert not first.cached and first.library.exists()
    assert "-arch=sm_90" in first.command
    second = runtime.build([src], arch="sm_90")
    assert second.cached and second.library == first.library
    assert time.perf_counter() - t0 < 60
    src.write_text(KERNEL.replace("a * x[i]", "a * x[i] + 0.0f"))
    assert runtime.build([src], arch="sm_90").library != first.library


@pytest.mark.nvcc
@pytest.mark.skipif(runtime.find_nvcc() is None, reason="nvcc is not installed")
def test_build_error_carries_the_log(cache):
    src = cache / "bad.cu"
    src.write_text("__global__ void k() { undefined_symbol(); }\n")
    with pytest.raises(runtime.BuildError) as e:
        runtime.build([src], arch="sm_90")
    assert "undefined_symbol" in e.value.log


def test_host_library_call_passes_pointers_ints_floats(cache):
    src = cache / "h.cpp"
    src.write_text(
        '#include <cstdint>\nextern "C" int scale(const float* x, float* y, int64_t n, double a, void* s) {'
        " if (s) return 7; for (int64_t i = 0; i < n; ++i) y[i] = (float)a * x[i]; return 0; }\n"
        'extern "C" int fail(void* s) { return 2; }\n'
    )
    lib = runtime.load(src)
    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    lib.call("scale", x, y, x.numel(), 2.5)
    assert torch.equal(y, x * 2.5)
    with pytest.raises(RuntimeError, match="fail failed: CUDA error 2"):
        lib.call("fail")
    with pytest.raises(TypeError):
        lib.call("scale", "not a tensor")


def test_call_all_hands_every_buffer_over_in_one_call(cache):
    """call_all passes an array of the tensors' pointers, in order, and the (here absent) stream."""
    src = cache / "all.cpp"
    src.write_text(
        '#include <cstdint>\n'
        'extern "C" int chain(void** p, void* s) {'
        " if (s) return 7;"
        " const float* x = (const float*)p[0]; float* y = (float*)p[1]; float* z = (float*)p[2];"
        " for (int i = 0; i < 5; ++i) { y[i] = x[i] + 1.0f; z[i] = y[i] * 2.0f; } return 0; }\n"
        'extern "C" int refuse(void** p, void* s) { return 3; }\n'
    )
    lib = runtime.load(src)
    x = torch.arange(5, dtype=torch.float32)
    y, z = torch.empty_like(x), torch.empty_like(x)
    lib.call_all("chain", [x, y, z])
    assert torch.equal(y, x + 1) and torch.equal(z, (x + 1) * 2)
    with pytest.raises(RuntimeError, match="refuse failed: CUDA error 3"):
        lib.call_all("refuse", [x])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_launcher_runs_on_the_current_stream(cache):
    src = cache / "k.cu"
    src.write_text(KERNEL)
    lib = runtime.load(src)
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    expect = y + 3.0 * x
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        lib.call("launch_axpy", x, y, 3.0, x.numel())
    s.synchronize()
    torch.testing.assert_close(y, expect)
