"""The fixed CUDA the emitters inline (agents/coder/cuda/*.cuh, package data): loaded without its
`//!` documentation, placeholders filled or refused, and shipped with the package."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from stitchcuda.agents.coder import codegen, cuda_text, emit_gemm

ROOT = Path(__file__).resolve().parents[1]
CUDA = resources.files("stitchcuda.agents.coder").joinpath("cuda")


def test_every_file_loads_without_its_documentation():
    names = sorted(p.name for p in CUDA.iterdir() if p.name.endswith(".cuh"))
    assert {"prelude.cuh", "reduce.cuh", "conv.cuh", "gemm.cuh", "norm_common.cuh", "loss.cuh"} <= set(names)
    for name in names:
        raw = CUDA.joinpath(name).read_text()
        assert raw.startswith("//! "), f"{name}: say what it is for in //! lines"
        text = cuda_text.load(name)
        assert "//!" not in text and raw.endswith(text)


def test_fill_refuses_unknown_and_unfilled_placeholders():
    with pytest.raises(KeyError, match="@BLOCKS_PER_SM@ not filled"):
        cuda_text.fill("prelude.cuh", THREADS=256)
    with pytest.raises(KeyError, match="no placeholder @NOPE@"):
        cuda_text.fill("conv.cuh", THREADS=256, NOPE=1)


def test_generated_source_is_self_contained():
    """The prelude and family code are inlined, never #included: the candidate's .cu is one file."""
    text = codegen.render([])
    assert "@" not in text and "//!" not in text
    assert not re.search(r'#include\s+"', text)  # only system and CUDA headers
    assert f"((size_t){emit_gemm.WORKSPACE_BYTES})" in emit_gemm._FAMILY


def test_shipped_as_package_data():
    text = (ROOT / "pyproject.toml").read_text()  # tomllib is 3.11+; the project runs on 3.10
    section = text[text.index("[tool.setuptools.package-data]"):]
    section = section[: section.index("\n[", 1)]
    assert re.search(r'^"stitchcuda\.agents\.coder" = \[.*"cuda/\*\.cuh".*\]$', section, re.M)
