"""A vector's lanes that read one broadcast element (a channel's bias) load it once, from the
vector's base (codegen._lane_invariant), in prologue loaders and in epilogues' vector form. The
vector forms run only in GPU kernels, so here they are compiled by nvcc into a host harness and
checked lane for lane against the element forms (which the CPU tests of whole candidates cover),
on shapes where the broadcast spans whole vectors and where it does not."""

from __future__ import annotations

import ctypes

import pytest
import torch
import torch.nn as nn
from conftest import needs_nvcc

from stitchcuda import runtime
from stitchcuda.agents import graph
from stitchcuda.agents.coder import codegen, cuda_text

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_lane_invariance_needs_broadcast_innermost_over_whole_vectors():
    assert codegen._lane_invariant((4, 8, 64), (0, 1, 0))  # a channel's bias over rows of 64
    assert codegen._lane_invariant((4, 8, 4, 4), (0, 1, 0, 0))  # over planes of 4 x 4
    assert codegen._lane_invariant((4, 8, 16, 1), (0, 1, 0, 0))  # (a size-1 dimension is no boundary)
    assert not codegen._lane_invariant((4, 8, 6), (0, 1, 0))  # a vector of 4 crosses channels
    assert not codegen._lane_invariant((4, 8, 24), (0, 1, 0))  # 24 is not a multiple of 16 lanes
    assert not codegen._lane_invariant((4, 64), (0, 1))  # one element a lane (a bias over features)
    assert not codegen._lane_invariant((4, 64), (64, 1))  # read at the element itself


class ChannelAffine(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1))
        self.shift = nn.Parameter(torch.randn(channels, 1))

    def forward(self, x):
        return torch.clamp(x * self.scale + self.shift, -1.5, 2.0)


def _chain(inner: int) -> tuple[list, list[str], str, str]:
    x = torch.randn(3, 5, inner)
    nodes = graph.trace_module(ChannelAffine(5), [x])
    computed = [n["name"] for n in nodes if n["op"] in codegen.POINTWISE]
    source = next(n["name"] for n in nodes if n["op"] == "input" and n.get("kind") == "arg")
    return nodes, computed, computed[-1], source


def _harness(pro: codegen.Prologue, ep: codegen.Epilogue) -> str:
    prelude = cuda_text.fill("prelude.cuh", THREADS=codegen.THREADS, BLOCKS_PER_SM=codegen.BLOCKS_PER_SM)
    ep_params = ", ".join(f"const void* in{k}" for k in range(len(ep.inputs)))
    return f"""{prelude}
{pro.loader("t_ld")}
{ep.functor("t_ep")}
extern "C" int pro_check({", ".join(pro.params())}, float* one, float* vec, long long n) {{
  const auto ld = {pro.construct("t_ld")};
  for (long long e = 0; e < n; ++e) one[e] = ld(e);
  for (long long b = 0; b + 4 <= n; b += 4) {{
    const sc_vec<float, 4> v = ld.template vec<4>(b);
    for (int l = 0; l < 4; ++l) vec[b + l] = v.v[l];
  }}
  return 0;
}}
extern "C" int ep_check({ep_params}, const float* x, float* one, float* vec, long long n) {{
  const auto ep = {ep.construct("t_ep", 0)};
  for (long long e = 0; e < n; ++e) one[e] = ep(e, x[e]);
  for (long long b = 0; b + 4 <= n; b += 4) {{
    sc_vec<float, 4> xv;
    for (int l = 0; l < 4; ++l) xv.v[l] = x[b + l];
    const sc_vec<float, 4> v = ep.template vec<4>(b, xv);
    for (int l = 0; l < 4; ++l) vec[b + l] = v.v[l];
  }}
  return 0;
}}
"""


@needs_nvcc
@pytest.mark.parametrize("inner,shared", [(64, True), (6, False)], ids=["rows-of-64", "rows-of-6"])
def test_vector_forms_equal_the_element_forms(tmp_path, inner, shared):
    nodes, members, end, source = _chain(inner)
    pro = codegen.prologue(nodes, members, end)
    ep = codegen.epilogue(nodes, members, end, source)
    assert pro.vectorised and ep.vec_result
    # Where the broadcast spans whole vectors, the channel is found from base (once a vector);
    # where a vector may cross channels, from each lane's own index.
    assert any("base" in line for line in pro.vec_lines) is shared
    assert any("base" in line for line in ep.vec_lines) is shared
    cu = tmp_path / "lanes.cu"
    cu.write_text(_harness(pro, ep))
    lib = ctypes.CDLL(str(runtime.build([cu]).library))

    torch.manual_seed(1)
    values = {n["name"]: torch.randn(n["shape"]) for n in nodes if n["op"] == "input"}
    x = values[source]
    want = torch.clamp(x * values["scale"] + values["shift"], -1.5, 2.0).reshape(-1)
    n = x.numel()
    for name, args in (("pro_check", [values[a.name] for a in pro.inputs]),
                       ("ep_check", [values[a.name] for a in ep.inputs] + [x])):
        one, vec = torch.full((n,), float("nan")), torch.full((n,), float("nan"))
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in args]
        assert fn(*ptrs, ctypes.c_void_p(one.data_ptr()), ctypes.c_void_p(vec.data_ptr()), ctypes.c_longlong(n)) == 0
        whole = n - n % 4  # (the vector loops' tail is the element form's)
        assert torch.equal(one[:whole], vec[:whole]), \
            f"{name}: lanes differ at {(one[:whole] != vec[:whole]).nonzero().flatten()[:8].tolist()}"
        torch.testing.assert_close(one, want)
