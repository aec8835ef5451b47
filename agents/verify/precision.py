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
    # Fused ops whose projections run through cuBLAS inside them (eval-mode nn.MultiheadAttention and
    # nn.TransformerEncoderLayer; the epilogue-fused addmm).
    "_native_multi_head_attention", "_transformer_encoder_layer_fwd", "_addmm_activation",
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


# The operands a TF32 tensor core rounds, per aten op (positions in its arguments): a convolution's
# input and weight, a product's two factors. Ops made of these (linear, matmul, einsum, attention's
# math path) reach the dispatcher as them.
TF32_OPERANDS: dict[str, tuple[int, ...]] = {
    "convolution": (0, 1), "_convolution": (0, 1), "cudnn_convolution": (0, 1),
    "cudnn_convolution_transpose": (0, 1), "mm": (0, 1), "bmm": (0, 1),
    "addmm": (1, 2), "baddbmm": (1, 2), "addbmm": (1, 2),
}  # (not dot, mv, addmv: cuBLAS runs vector products without tensor cores)
TF32_ROUNDINGS = ("nearest", "zero")


def tf32_round(t: torch.Tensor, rounding: str) -> torch.Tensor:
    """`t`'s values cut to TF32's 11 significant bits (10 stored), to nearest or toward zero, in t's
    own dtype (float64 here: the emulation runs the rest exactly)."""
    m, e = torch.frexp(t)
    scaled = m * 2048.0  # m in [0.5, 1): 11 significant bits above the point
    scaled = torch.round(scaled) if rounding == "nearest" else torch.trunc(scaled)
    return torch.ldexp(scaled / 2048.0, e)


@contextmanager
def tf32_emulated(rounding: str) -> Iterator[None]:
    """While it is on, every convolution and matrix product rounds its operands as TF32 tensor cores
    do and computes the rest at the tensors' own precision: run in float64, the result the tf32
    policy allows, whatever algorithm cuDNN would pick (its heuristics choose non-TF32 kernels for
    some convolutions even with TF32 on, so PyTorch's own run under the flags says little)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Operands(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            where = TF32_OPERANDS.get(_base(func.name()))
            if where:
                args = tuple(tf32_round(a, rounding) if k in where and isinstance(a, torch.Tensor)
                             and a.is_floating_point() else a for k, a in enumerate(args))
            return func(*args, **(kwargs or {}))

    with _Operands():
        yield
