"""logsumexp's state taking a vector at a time (sc_red_lse::add_vec in cuda/reduce.cuh: one max
and one rescale a vector) against taking each element (add), compiled by nvcc for the host: the
same values up to rounding on ordinary rows, and ATen's answers where rows hold infinities or NaN,
which take the element-wise rules."""

from __future__ import annotations

import ctypes
import math

import pytest
import torch
from conftest import needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents.coder import codegen, cuda_text, emit_reduce

pytestmark = pytest.mark.usefixtures("isolated_cache")

_HARNESS = """
extern "C" int lse_rows(const float* x, float* by_vec, float* by_elem, int rows, int n) {
  const sc_red_lse op{0.0f, 0.0f};
  for (int r = 0; r < rows; ++r) {
    auto a = op.init(), b = op.init();
    for (int k = 0; k + 4 <= n; k += 4) {
      float f[4];
      for (int l = 0; l < 4; ++l) f[l] = x[r * n + k + l];
      op.add_vec<4>(a, f);
      for (int l = 0; l < 4; ++l) op.add(b, f[l], k + l);
    }
    by_vec[r] = op.value(a);
    by_elem[r] = op.value(b);
  }
  return 0;
}
"""


@needs_nvcc
def test_a_vector_at_a_time_gives_what_an_element_at_a_time_gives(tmp_path):
    prelude = cuda_text.fill("prelude.cuh", THREADS=codegen.THREADS, BLOCKS_PER_SM=codegen.BLOCKS_PER_SM)
    cu = tmp_path / "lse.cu"
    cu.write_text(prelude + emit_reduce._header() + _HARNESS)
    fn = ctypes.CDLL(str(runtime.build([cu]).library)).lse_rows
    fn.restype = ctypes.c_int
    torch.manual_seed(3)
    n = 64
    x = torch.randn(12, n) * 30.0
    x[1, 5] = math.inf
    x[2, :] = -math.inf
    x[3, 17] = math.nan
    x[4, 0:8] = -math.inf  # (the first vectors: the state's max stays -inf, then finite)
    x[5, 40] = -math.inf
    x[6, 3] = math.inf
    x[6, 9] = -math.inf
    x[7] = torch.linspace(-200.0, 200.0, n)  # the max rises every vector
    x[8] = torch.linspace(200.0, -200.0, n)  # the max is the first element
    by_vec, by_elem = torch.empty(12), torch.empty(12)
    args = [ctypes.c_void_p(t.data_ptr()) for t in (x, by_vec, by_elem)]
    assert fn(*args, ctypes.c_int(12), ctypes.c_int(n)) == 0
    want = torch.logsumexp(x.double(), dim=1).float()
    torch.testing.assert_close(by_elem, want, rtol=1e-6, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(by_vec, want, rtol=1e-6, atol=1e-5, equal_nan=True)
    assert math.isinf(by_vec[1]) and by_vec[1] > 0 and math.isinf(by_vec[2]) and by_vec[2] < 0
    assert math.isnan(by_vec[3])
