"""Finding the CUDA libraries' headers and shared objects for a build (stitchcuda/cuda_libs.py), on
folders laid out as a toolkit, a wheel and the environment variable lay them out."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import needs_nvcc

from stitchcuda import cuda_libs, runtime

INCLUDE_AT_START = [p for p in os.environ.get(cuda_libs.INCLUDE_ENV, "").split(os.pathsep) if p]


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No toolkit, no system folders, no wheels, no env folders, an empty user cache: each test adds
    what it needs."""
    monkeypatch.setattr(cuda_libs, "SYSTEM_INCLUDE", [tmp_path / "usr" / "include"])
    monkeypatch.setattr(cuda_libs, "SYSTEM_LIB", [tmp_path / "usr" / "lib"])
    monkeypatch.delenv(cuda_libs.INCLUDE_ENV, raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    return tmp_path


def test_headers_from_the_environment_and_a_versioned_wheel_library(clean_env, monkeypatch):
    inc = clean_env / "inc"
    touch(inc / "cublas_v2.h")
    monkeypatch.setenv(cuda_libs.INCLUDE_ENV, str(inc))
    lib = touch(clean_env / "site" / "nvidia" / "cublas" / "lib" / "libcublas.so.13")
    found = cuda_libs.locate(["cublas"], nvcc=None)
    assert not found.missing_headers
    assert found.include_flags == [f"-I{inc}"]
    # No unversioned libcublas.so in a wheel: linked by its path, found again at run time by rpath.
    assert found.link_args == [f"-Xlinker={lib}", f"-Xlinker=-rpath,{lib.parent}"]


def test_headers_and_library_from_a_wheel(clean_env):
    site = clean_env / "site" / "nvidia" / "cudnn"
    touch(site / "include" / "cudnn.h")
    touch(site / "lib" / "libcudnn.so")
    found = cuda_libs.locate(["cudnn"], nvcc=None)
    assert found.include_flags == [f"-I{site / 'include'}"]
    assert found.link_args == [f"-L{site / 'lib'}", "-lcudnn", f"-Xlinker=-rpath,{site / 'lib'}"]


def test_system_folders_need_no_flag(clean_env):
    touch(clean_env / "usr" / "include" / "cudnn.h")
    touch(clean_env / "usr" / "lib" / "libcudnn.so")
    touch(clean_env / "site" / "nvidia" / "cudnn" / "include" / "cudnn.h")  # found after the system's
    found = cuda_libs.locate(["cudnn"], nvcc=None)
    assert found.include_flags == [] and found.link_args == ["-lcudnn"]


def test_a_toolkit_header_needs_no_flag(clean_env):
    tk = clean_env / "cuda"
    nvcc = touch(tk / "bin" / "nvcc")
    touch(tk / "include" / "cublas_v2.h")
    touch(tk / "lib64" / "libcublas.so")
    found = cuda_libs.locate(["cublas"], nvcc=str(nvcc))
    assert found.include_flags == [] and found.link_args == ["-lcublas"] and not found.notes


def test_missing_headers_name_what_to_install(clean_env):
    found = cuda_libs.locate(["cublas", "cudnn"], nvcc=None)
    assert found.missing_headers == ["cublas", "cudnn"]
    assert found.notes  # neither library's shared object is here either
    hint = cuda_libs.install_hint(found.missing_headers)
    assert "cublas_v2.h" in hint and "cudnn.h" in hint
    assert "pip install nvidia-cublas nvidia-cudnn-cu13" in hint and cuda_libs.INCLUDE_ENV in hint


@needs_nvcc
def test_build_stops_before_the_compiler_with_the_hint(clean_env, tmp_path, monkeypatch):
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "build-cache"))
    src = tmp_path / "k.cu"
    src.write_text('#include <cublas_v2.h>\nextern "C" int f() { return 0; }\n')
    # The real toolkit may hold the header: hide it by pointing the search at an empty toolkit.
    monkeypatch.setattr(cuda_libs, "toolkit_root", lambda nvcc: clean_env / "no-toolkit")
    with pytest.raises(runtime.BuildError, match="cublas_v2.h not found.*pip install nvidia-cublas"):
        runtime.build([src], libraries=["cublas"])


@needs_nvcc
def test_a_library_missing_here_builds_and_says_why_it_cannot_run(clean_env, tmp_path, monkeypatch):
    # A machine with cuBLAS's headers but not its shared object (CI; a CPU-only torch): the build
    # links, and a call names the library it lacks instead of failing at import.
    # scripts/test.sh fetches the headers there and names the folder in the variable clean_env removed.
    fetched = [Path(__file__).resolve().parents[1] / ".cache" / "cuda-headers", *map(Path, INCLUDE_AT_START)]
    include = next((p for p in fetched if (p / "cublas_v2.h").exists()), None)
    if include is None:
        pytest.skip("no cuBLAS headers here (scripts/cuda_headers.sh fetches them)")
    monkeypatch.setenv(cuda_libs.INCLUDE_ENV, str(include))
    monkeypatch.setattr(cuda_libs, "toolkit_root", lambda nvcc: clean_env / "no-toolkit")
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "build-cache"))
    src = tmp_path / "k.cu"
    src.write_text('#include <cublas_v2.h>\nextern "C" int f(void* s) { cublasHandle_t h; return (int)cublasCreate(&h); }\n')
    result = runtime.build([src], libraries=["cublas"])
    assert result.unresolved and "libcublas.so" in result.unresolved[0]
    assert "note: libcublas.so not found here" in result.log
    lib = runtime.Library(result.library, unresolved=result.unresolved)
    if not lib.unloadable:
        pytest.skip("cuBLAS is already loaded in this process (a CUDA torch): the symbol resolved")
    assert "libcublas.so" in lib.unloadable
    with pytest.raises(RuntimeError, match="cannot run on this machine.*cublasCreate"):
        lib.call("f")


@needs_nvcc
def test_a_versioned_wheel_library_links_and_loads_for_real(clean_env, tmp_path, monkeypatch):
    # As PyTorch's wheels ship them: nvidia/<lib>/lib/lib<name>.so.N and no unversioned name. A
    # stand-in library (one function) is built with the host compiler and linked through the path.
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    libdir = clean_env / "site" / "nvidia" / "cudnn" / "lib"
    libdir.mkdir(parents=True)
    (clean_env / "site" / "nvidia" / "cudnn" / "include").mkdir(parents=True)
    (clean_env / "site" / "nvidia" / "cudnn" / "include" / "cudnn.h").write_text("int sc_fake_version(void);\n")
    c = tmp_path / "fake.c"
    c.write_text("int sc_fake_version(void) { return 91900; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-o", str(libdir / "libcudnn.so.9"), str(c)],
                   check=True)
    monkeypatch.setattr(cuda_libs, "toolkit_root", lambda nvcc: clean_env / "no-toolkit")
    monkeypatch.setenv("STITCHCUDA_CACHE", str(tmp_path / "build-cache"))
    src = tmp_path / "k.cu"
    src.write_text('extern "C" {\n#include <cudnn.h>\n}\nextern "C" int f(void* s) { return sc_fake_version() == 91900 ? 0 : 1; }\n')
    result = runtime.build([src], libraries=["cudnn"])
    assert not result.unresolved
    runtime.Library(result.library).call("f")  # raises unless the call returned 0
