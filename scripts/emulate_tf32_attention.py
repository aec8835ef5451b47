"""Which matmuls of level3/43 (MinGPT causal attention) need more than TF32 to meet the Verifier's
tolerance, emulated on the CPU: each matmul's operands rounded to TF32's 10-bit mantissa (or not),
the output compared with the fp32 reference as the Verifier compares (rtol 0.01, atol 0.01 x
mean|ref|), on the Verifier's adversarial transforms of get_inputs' torch.rand: x1000, mixed sign,
negated. Evidence for agents/coder/precision_mix.py.

Usage: python scripts/emulate_tf32_attention.py [BATCH]   (default 4; the level's 128 is slow on a CPU)
"""

from __future__ import annotations

import itertools
import math
import sys

import torch

from stitchcuda.agents.verify.compare import Tolerance, _compare_tensor

T, C, H = 512, 768, 8  # level3/43's sequence length, embedding and heads


def tf32(a: torch.Tensor) -> torch.Tensor:
    """Rounded to nearest at TF32's 10 mantissa bits (as the tensor cores read fp32 operands)."""
    i = a.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def main(batch: int) -> None:
    torch.manual_seed(0)
    w1, b1 = (torch.rand(3 * C, C) * 2 - 1) / math.sqrt(C), (torch.rand(3 * C) * 2 - 1) / math.sqrt(C)
    w2, b2 = (torch.rand(C, C) * 2 - 1) / math.sqrt(C), (torch.rand(C) * 2 - 1) / math.sqrt(C)
    mask = torch.tril(torch.ones(T, T))

    def mm(a: torch.Tensor, b: torch.Tensor, rounded: int) -> torch.Tensor:
        return tf32(a) @ tf32(b) if rounded else a @ b

    def forward(x: torch.Tensor, r: tuple[int, ...]) -> torch.Tensor:  # r: TF32 in (qkv, q.kT, att.v, proj)
        q, k, v = (mm(x, w1.t(), r[0]) + b1).split(C, dim=2)
        q, k, v = (t.view(batch, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = mm(q, k.transpose(-2, -1), r[1]) * (1.0 / math.sqrt(C // H))
        att = att.masked_fill(mask == 0, float("-inf")).softmax(-1)
        y = mm(att, v, r[2]).transpose(1, 2).contiguous().view(batch, T, C)
        return mm(y, w2.t(), r[3]) + b2

    base = torch.rand(batch, T, C)
    tol = Tolerance(0.01, "tf32")
    with torch.no_grad():
        for name, x in (("large", base * 1e3), ("mixed-sign", (base - base.mean()) * 4), ("negated", -base)):
            ref = forward(x, (0, 0, 0, 0))
            for r in itertools.product((0, 1), repeat=4):
                m = _compare_tensor(ref, forward(x, r), tol, 0)
                print(f"{name:10} TF32 in (qkv, q.kT, att.v, proj) = {r}: {'ok  ' if m.ok else 'MISS'} {m.message[:80]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
