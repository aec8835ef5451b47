"""Host-side orchestration of a candidate's kernels: `stitch_forward` launches every kernel of forward
in order from one call, and `stitch_forward_graph` replays that as a CUDA graph once the same
buffers come back."""

from __future__ import annotations

import os
from collections.abc import Sequence

from stitchcuda.agents.coder import codegen, kernels

Step = codegen.PointwiseKernel | kernels.Kernel


FORWARD = "stitch_forward"


def orchestrator(steps: Sequence[Step], *, host: bool = False) -> str:
    """`stitch_forward(void** buffers, stream)`: every launcher of the forward in order, from one
    call. Python then pays one ctypes call per forward, not one per kernel: for a module of many
    small kernels that per-call cost (microseconds each) is the larger part of its time."""
    suffix, stream, stream_arg = ("_host", "nullptr", "void*") if host else ("", "s", "cudaStream_t s")
    lines = [
        "// Host-side orchestration: forward's kernels in order. Buffers arrive as one array of pointers;",
        "// sc_ptr converts each to the pointer type its launcher declares.",
        "struct sc_ptr {",
        "  void* p;",
        "  template <class T> operator T*() const { return static_cast<T*>(p); }",
        "};",
        f'extern "C" int {FORWARD}{suffix}(void** p, {stream_arg}) {{',
        "  int rc = 0;",
    ]
    i = 0
    for k in steps:
        n = len(k.inputs) + len(k.outputs) + len(getattr(k, "scratch", []))
        args = ", ".join([f"sc_ptr{{p[{j}]}}" for j in range(i, i + n)] + [stream])
        lines.append(f"  if ((rc = {k.name}{suffix}({args}))) return rc;")
        i += n
    lines += ["  return 0;", "}", ""]
    if not host and graphed(steps):
        lines.append(_GRAPH.replace("SC_NPTRS", str(max(1, i))))
    return "\n".join(lines)


# "0" writes no graph replay (forward launches its kernels one by one on every call), for an A/B of
# the replay's cost on small modules: on the fifth coverage sweep (one H200, 96b668a) timed forwards
# took 8-45 us more than their host time and GPU time explain, and where that goes is not measured.
GRAPHS_ENV = "STITCHCUDA_CUDA_GRAPHS"
# "1" replays a forward of one kernel of our own as a graph too (off: not yet measured). A cold
# call's steps on an H200 (scripts/probe_fast_path_steps.py, b4d8a42): the example's one direct
# launch took 8.3 us inside the foreign call, where two small modules' graph replays took 2.6 and
# 3.9 us; whether a replay of one kernel is as much cheaper is for an A/B (scripts/probe_ab.py).
GRAPH_ONE_ENV = "STITCHCUDA_GRAPH_ONE_KERNEL"


def graphed(steps: Sequence[Step]) -> bool:
    """Whether forward replays as a CUDA graph: with several kernels, or with one library call
    (a cuDNN graph's execute costs 30-250 us of host time per call on an H200, a replay ~10 us);
    one kernel of our own launches directly unless GRAPH_ONE_ENV says otherwise."""
    if os.environ.get(GRAPHS_ENV, "1") == "0":
        return False
    return len(steps) > 1 or any(isinstance(s, kernels.Kernel) and s.libraries for s in steps) \
        or (len(steps) == 1 and os.environ.get(GRAPH_ONE_ENV) == "1")


GRAPH_FORWARD = "stitch_forward_graph"
# A CUDA graph over the whole forward: after the same buffers have come three times (the first
# calls run eagerly, so library setup such as cuDNN's algorithm search and workspace growth never
# happens inside a capture), forward is captured once on a private stream and then replayed with
# one cudaGraphLaunch on the caller's stream. Any capture failure turns graphs off for the process
# and forward runs eagerly, as without them. The table and the capture are behind one mutex: the
# loader's CDLL call lets go of the GIL, so two threads may call forward at once.
_GRAPH = r"""#include <atomic>
#include <cstring>
#include <mutex>
struct sc_graph_entry {
  void* p[SC_NPTRS];
  int seen;
  cudaGraphExec_t exec;
};
static sc_graph_entry sc_graphs[8];
static int sc_graphs_used = 0, sc_graphs_evict = 0;
static std::atomic<bool> sc_graphs_off{false};
static std::mutex sc_graphs_mu;
static cudaStream_t sc_capture = nullptr;

static int sc_graphs_fail(void** p, cudaStream_t s) {
  sc_graphs_off = true;
  cudaGetLastError();  // the failed capture's error is not the forward's
  return stitch_forward(p, s);
}

extern "C" int stitch_forward_graph(void** p, cudaStream_t s) {
  if (sc_graphs_off) return stitch_forward(p, s);
  // The caller's stream is being captured (the user's own CUDA graph): the kernels go into that
  // graph as they are; a capture of ours begun inside it would fail, or invalidate the user's.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  const cudaError_t asked = cudaStreamIsCapturing(s, &capturing);
  if (asked != cudaSuccess) {
    // (the legacy stream while a blocking stream is captured: nothing may run on it until that ends)
    cudaGetLastError();
    return (int)asked;
  }
  if (capturing != cudaStreamCaptureStatusNone) return stitch_forward(p, s);
  std::lock_guard<std::mutex> hold(sc_graphs_mu);
  if (sc_graphs_off) return stitch_forward(p, s);
  sc_graph_entry* e = nullptr;
  for (int i = 0; i < sc_graphs_used && !e; ++i)
    if (std::memcmp(sc_graphs[i].p, p, sizeof(void*) * SC_NPTRS) == 0) e = &sc_graphs[i];
  if (!e) {
    e = &sc_graphs[sc_graphs_used < 8 ? sc_graphs_used++ : (sc_graphs_evict++ % 8)];
    if (e->exec) cudaGraphExecDestroy(e->exec);
    std::memcpy(e->p, p, sizeof(void*) * SC_NPTRS);
    e->seen = 0;
    e->exec = nullptr;
  }
  if (e->exec) return (int)cudaGraphLaunch(e->exec, s);
  if (++e->seen < 3) return stitch_forward(p, s);
  if (!sc_capture && cudaStreamCreateWithFlags(&sc_capture, cudaStreamNonBlocking) != cudaSuccess)
    return sc_graphs_fail(p, s);
  if (cudaStreamBeginCapture(sc_capture, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return sc_graphs_fail(p, s);
  const int rc = stitch_forward(p, sc_capture);
  cudaGraph_t g = nullptr;
  const cudaError_t end = cudaStreamEndCapture(sc_capture, &g);
  if (rc || end != cudaSuccess || !g || cudaGraphInstantiate(&e->exec, g, 0) != cudaSuccess) {
    if (g) cudaGraphDestroy(g);
    e->exec = nullptr;
    return sc_graphs_fail(p, s);
  }
  cudaGraphDestroy(g);
  return (int)cudaGraphLaunch(e->exec, s);
}
"""


def describe(step: Step) -> str:
    if isinstance(step, codegen.PointwiseKernel):
        return f"{' -> '.join(step.ops) or 'copy'} over {step.shape}"
    return "; ".join(step.ops) or step.name


def libraries(steps: Sequence[Step]) -> list[str]:
    return list(dict.fromkeys(lib for s in steps if isinstance(s, kernels.Kernel) for lib in s.libraries))
