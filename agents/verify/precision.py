"""The precision policy a candidate is built and judged under, said out loud.

- "tf32": fp32 matmuls and convolutions may run on TF32 tensor cores (10-bit mantissa inputs, fp32
  accumulation), as `torch.set_float32_matmul_precision("high")` plus cuDNN's TF32 (PyTorch's
  default for convolutions) allow. Outputs of matmul-like ops are held to 1e-2 relative.
- "strict": no TF32 anywhere: fp32 matmuls and convolutions run in full fp32, as PyTorch's own
  defaults do for matmul (`"highest"`) with cuDNN's TF32 turned off too.

torch.compile's figure is only a fair baseline under the same policy: `under(policy)` switches
PyTorch's process-wide TF32 flags for the matched timing and puts them back afterwards.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from stitchcuda.types import POLICIES

DEFAULT = "tf32"

# aten ops whose fp32 result depends on the matmul TF32 switch (cuBLAS) or cuDNN's (convolutions):
# where a reference has none, torch.compile under a matched policy is torch.compile as it is.
CUDNN_SENSITIVE = {
    "convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_scaled_dot_product_cudnn_attention",
    "_cudnn_rnn",
}
MATMUL_SENSITIVE = {
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "addmv", "mv", "dot", "einsum",
    "tensordot", "_scaled_mm", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention",
}
TF32_SENSITIVE = CUDNN_SENSITIVE | MATMUL_SENSITIVE


def _base(name: str) -> str:
    return name.removeprefix("aten::").removeprefix("aten.").split(".")[0]


def check(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"unknown precision {policy!r}: one of {', '.join(POLICIES)}")
    return policy


def flags_for(policy: str) -> dict[str, bool]:
    """PyTorch's TF32 switches as the policy sets them."""
    tf32 = check(policy) == "tf32"
    return {"matmul": tf32, "cudnn": tf32}


def sensitive(op_names: Iterable[str]) -> bool:
    """Whether any of these aten ops runs differently under TF32. Names as the dispatch recorder keeps
    them ("addmm"), or qualified ("aten::addmm", "aten.addmm.default", "addmm.default")."""
    return any(_base(name) in TF32_SENSITIVE for name in op_names)


def current_flags() -> dict[str, bool]:
    """PyTorch's TF32 switches as this process has them now (by default: matmul off, cuDNN on)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "cudnn": bool(torch.backends.cudnn.allow_tf32)}


def needs_matched(policy: str, op_names: Iterable[str], flags: dict[str, bool] | None = None) -> bool:
    """Whether torch.compile under `policy` would compute the reference's ops differently from
    torch.compile under `flags` (default: the current switches): only then is a separate matched
    timing worth taking. A switch counts only where the reference has an op it governs."""
    flags = flags if flags is not None else current_flags()
    want = flags_for(policy)
    names = {_base(n) for n in op_names}
    return ((bool(names & MATMUL_SENSITIVE) and want["matmul"] != flags["matmul"])
            or (bool(names & CUDNN_SENSITIVE) and want["cudnn"] != flags["cudnn"]))


@contextmanager
def under(policy: str) -> Iterator[None]:
    """PyTorch's TF32 switches as `policy` has them, for the duration; the previous values after."""
    want = flags_for(policy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newer torch deprecates allow_tf32 in favour of fp32_precision
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                 torch.get_float32_matmul_precision())
        try:
            torch.backends.cuda.matmul.allow_tf32 = want["matmul"]
            torch.backends.cudnn.allow_tf32 = want["cudnn"]
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
            torch.set_float32_matmul_precision(saved[2])
