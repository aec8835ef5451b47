"""stream_join.py: PyTorch's recipe for capturing a CUDA graph warms up on a side stream that the
caller's stream then waits for; static_check passed it as side-stream use before, which rejected
an honest LLM candidate's graph capture. A stream entered without that join, or handed anywhere
else, is still a finding (gpu_side_stream runs one through the worker's trace check on a GPU)."""

from __future__ import annotations

import pytest

from stitchcuda.agents.verify.static_check import check_candidate_sources

_MODULE = '''import torch, torch.nn as nn
from pathlib import Path
from stitchcuda import runtime
_lib = runtime.load(Path(__file__).with_name("kernels.cu"))
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None
{init}
    def forward(self, x):
        out = torch.empty_like(x)
{body}
        return out
'''
_WARM = '''            for _ in range(3):
                _lib.call("k", x, out)'''


def _codes(body: str, init: str = "        pass") -> set[str]:
    files = {"model_new.py": _MODULE.format(init=init, body=body), "kernels.cu": "__global__ void k() {}\n"}
    return {f.code for f in check_candidate_sources(files, "model_new.py")}


JOINED = {
    "local stream": f'''        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
{_WARM}
        torch.cuda.current_stream().wait_stream(s)
        _lib.call("k", x, out)''',
    "kept stream, graph capture": f'''        if self.graph is None:
            self.s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.s):
{_WARM}
            torch.cuda.current_stream().wait_stream(self.s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                _lib.call("k", x, out)
        self.graph.replay()''',
}


@pytest.mark.parametrize("body", JOINED.values(), ids=JOINED.keys())
def test_a_side_stream_joined_before_going_on_passes(body):
    init = "        self.s = torch.cuda.Stream()" if "self.s" in body else "        pass"
    assert "side-stream" not in _codes(body, init=init)


NOT_JOINED = {
    "never joined": f'''        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
{_WARM}''',
    "returns before the join": f'''        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
{_WARM}
        if x.numel() > 0:
            return out
        torch.cuda.current_stream().wait_stream(s)''',
    "entered twice, joined once": f'''        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
{_WARM}
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.stream(s):
            _lib.call("k", x, out)''',
    "handed to a kernel": f'''        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
{_WARM}
        torch.cuda.current_stream().wait_stream(s)
        _lib.call("k", x, out, s.cuda_stream)''',
    "the wait the wrong way round": f'''        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
{_WARM}
        s.wait_stream(torch.cuda.current_stream())''',
}


@pytest.mark.parametrize("body", NOT_JOINED.values(), ids=NOT_JOINED.keys())
def test_a_side_stream_not_joined_is_still_a_finding(body):
    assert "side-stream" in _codes(body)
