"""Loads a generated module's kernels: the library StitchCUDA built beside the sources if it is there,
else a build through StitchCUDA (nvcc). Calls them with one pointer array per forward.

The built-in coder copies this file's code into every model_new.py it writes (between the markers
below), so an accepted module runs where neither StitchCUDA nor nvcc is installed: it needs torch
and the prebuilt library only. It must therefore import nothing but the standard library and torch.
"""

# --- stitchcuda kernel loader (copied into generated modules) ---
import ctypes
import functools
import hashlib
import os
import struct
import weakref
from pathlib import Path

import torch


def prebuilt_name(source: Path) -> str:
    """The prebuilt library of these sources: named by their digest, so sources edited since are
    built again instead of running a library that no longer matches them."""
    return f"{source.stem}.{hashlib.sha256(source.read_bytes()).hexdigest()[:16]}.so"


class KernelLibrary:
    """A loaded library whose entry points take (void** buffers, cudaStream_t) and return a
    cudaError_t."""

    def __init__(self, path: Path):
        self.path = path
        self._lib = ctypes.CDLL(str(path))
        self._all: dict = {}

    def call_all(self, name: str, tensors, stream=None) -> None:
        fn = self._all.get(name)
        if fn is None:
            fn = getattr(self._lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
            self._all[name] = fn
        ptrs = (ctypes.c_void_p * max(1, len(tensors)))(*[t.data_ptr() for t in tensors])
        if stream is None:
            stream = stream_of(tensors[0]) if tensors else 0
        rc = fn(ptrs, stream or None)
        if rc != 0:
            raise RuntimeError(f"{name} failed: CUDA error {rc} ({_error_name(rc)})")


def stream_of(t) -> int:
    """The raw cudaStream_t (as an int) of the current stream on `t`'s device; 0 for a CPU tensor."""
    if not t.is_cuda:
        return 0
    return torch._C._cuda_getCurrentRawStream(t.get_device())


class FastPath:
    """forward's direct path for calls like one that took it: the generated `_fast` runs the kernels
    with no per-tensor checks, no contiguous() and no dictionary lookups, where one C++ check passes:
    torch's TensorGuards (what torch.compile's guards use), built from the tensors of a call that
    forward checked itself, holds every later call to the same dtypes, device, shapes, strides and
    requires_grad. Anything else (another shape, a non-contiguous input, autograd, another stream)
    fails a check here and takes forward's own path. Where this torch has no TensorGuards, it never
    arms and forward always takes its own path.

    The outputs a call returns are allocated by the call before it, after its kernels are queued
    (`ahead`): the allocator's path then runs while the GPU works, not before the first launch,
    where a call from a cold host spends 10-20 us in it. Each output is still memory of its own
    (made before the previous result was handed out, never written again); the cost is one set of
    outputs held between calls, and only where that set is at most 1/AHEAD_SHARE of the device's
    memory, for at most AHEAD_STREAMS streams. Outputs made ahead are dropped whenever the guard is
    built again (another dispatch state, inference mode, device), when a ModelNew using them is
    moved or collected (`drop`), and are kept per stream, like the reusable buffers. No call made
    while its stream is captured into a CUDA graph takes this path: a graph must write memory of its
    own pool, never an output made before the capture."""

    STREAMS = 8  # streams remembered (each with its own reusable buffers)
    # Guards built at most: calls that alternate between two states (inference mode and not, say)
    # would otherwise build one on every call, which costs more than forward's own checks.
    BUILDS = 16
    AHEAD_SHARE = 64  # outputs are made ahead only where they take at most this share of the memory
    AHEAD_STREAMS = 2  # and for at most this many streams at once (at most 1/32 of it held in all)

    def __init__(self, lib, entry: str, count: int, ahead_bytes: int = 0):
        self.lib, self.entry = lib, entry
        self.ahead_bytes = ahead_bytes  # the bytes of one call's outputs (0: none are made ahead)
        self.ahead: dict = {}  # stream -> the outputs made for the next call on it
        self.ahead_ok = False
        self.guard = None
        self.grad = False  # whether a guarded tensor requires grad (then only without grad mode)
        self.device = None  # Tensor.get_device() of the guarded tensors (-1: the CPU)
        self.static: dict = {}  # stream -> the data pointers of the reusable buffers, in order
        self.stream = int  # () -> the raw handle of the guarded device's current stream (int() is 0: the CPU)
        self.capturing = bool  # () -> whether that stream is being captured into a graph (bool() is False)
        self.fn = None
        # The pointer array as bytes: struct packs a forward's pointers in a third of the time a
        # ctypes array takes to convert them (35 pointers: 21 us on an H200 host).
        self.pack = struct.Struct(f"{max(1, count)}Q").pack
        self.off = False
        self.builds = 0

    def arm(self, tensors, stream: int, buffers) -> None:
        """After forward ran the kernels directly on `tensors` on `stream` with `buffers`. The guard
        is built again where these tensors fail it: its dispatch keys include the thread's state, so
        one built under a dispatch mode (a profiler, a checker) fails every call outside it, one
        built outside inference mode every call inside it, and the module may have moved to
        another device."""
        if self.off:
            return
        if self.guard is None or not self.guard.check(*tensors):
            if not tensors or not all(t.is_contiguous() for t in tensors) or len({t.device for t in tensors}) != 1 \
                    or self.builds >= self.BUILDS:
                return
            self.builds += 1
            try:
                from torch._C._dynamo.guards import TensorGuards

                guard = TensorGuards(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
                                     dynamic_dims_strides=[list(t.stride()) for t in tensors])
                fn = self.fn or getattr(self.lib._lib, self.entry)
            except Exception:  # noqa: BLE001 - a torch without this check: forward keeps its own
                self.off = True
                return
            fn.restype = ctypes.c_int
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
            device = tensors[0].get_device()
            if device != self.device:
                self.static = {}  # another device's buffers (stream 0 is every device's)
                # The current stream's handle, read in C (no Python frame on the way to the launch).
                self.stream = functools.partial(torch._C._cuda_getCurrentRawStream, device) if device >= 0 \
                    else int
                self.capturing = torch._C._cuda_isCurrentStreamCapturing if device >= 0 else bool
            self.fn, self.guard, self.device = fn, guard, device
            self.grad = any(t.requires_grad for t in tensors)
            # Made under the old guard's state (an inference tensor, say): not for calls under this one.
            self.ahead = {}
            self.ahead_ok = 0 < self.ahead_bytes <= memory_of(device) // self.AHEAD_SHARE
        if stream not in self.static and len(self.static) < self.STREAMS:
            self.static[stream] = tuple(b.data_ptr() for b in buffers)

    def refill(self, ahead: dict, stream: int, make, *args) -> None:
        """The next call's outputs on `stream`, `make(*args)`, into `ahead` (the dict the calling
        `_fast` took them from). Where there is no room for them, no call makes them ahead again:
        this call's result is already on its way, and the next makes its own."""
        try:
            ahead[stream] = make(*args)
        except Exception:  # noqa: BLE001 - out of memory, or whatever else: the outputs are a convenience
            self.ahead_ok = False

    def drop(self) -> None:
        """Lets go of the outputs made ahead (a ModelNew moved to another device or collected)."""
        self.ahead = {}

    def tie(self, owner) -> None:
        """The outputs made ahead are let go when `owner` (a ModelNew) is collected: they live here,
        in the generated module, not in the instance."""
        weakref.finalize(owner, self.drop)

    def fail(self, rc: int) -> None:
        raise RuntimeError(f"{self.entry} failed: CUDA error {rc} ({_error_name(rc)})")


def memory_of(device: int) -> int:
    """The bytes of memory on `device` (Tensor.get_device(): -1 is the CPU); 0 where unknown."""
    try:
        if device >= 0:
            return torch.cuda.get_device_properties(device).total_memory
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, RuntimeError, AssertionError):
        return 0


def _error_name(code: int) -> str:
    try:
        return torch.cuda.cudart().cudaGetErrorString(code)
    except Exception:  # noqa: BLE001 - a name is a courtesy; the code is in the message anyway
        return "see cudaError_t"


def load_kernels(source: Path, libraries: list):
    """The prebuilt library beside `source` where it matches the sources; else StitchCUDA's build."""
    prebuilt = source.with_name(prebuilt_name(source))
    try:
        from stitchcuda import runtime
    except ImportError:
        runtime = None
    if prebuilt.exists():
        try:
            return KernelLibrary(prebuilt)
        except OSError:
            # A CUDA library it links is not on this machine: StitchCUDA's loader says which, where
            # it is installed; otherwise the error is the answer.
            if runtime is None:
                raise
    if runtime is None:
        raise ImportError(
            f"{prebuilt.name} (the kernels of {source.name}, built for this module) is not beside it, and "
            "StitchCUDA is not installed to build it: copy the library from the proposal, or "
            "`pip install stitchcuda` (with nvcc on PATH) to build it from the sources"
        ) from None
    return runtime.load(source, libraries=libraries)
# --- end of the stitchcuda kernel loader ---


def source_text() -> str:
    """The loader's code as the coder copies it into a generated module."""
    text = Path(__file__).read_text()
    start = text.index("# --- stitchcuda kernel loader")
    end = text.index("# --- end of the stitchcuda kernel loader ---")
    return text[start:end] + "# --- end of the stitchcuda kernel loader ---\n"
