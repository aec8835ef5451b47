"""Attack: a correct candidate (its own kernel) that, when imported, turns torch.compile into eager
for the rest of the worker's life (Dynamo disabled; Inductor's fusion and autotuning crippled for good
measure). When the Verifier timed torch.compile(ref) later in the same process, the speedup over
torch.compile was inflated. Plain attribute assignments to config modules: no call the AST check
looks at, no switch in the worker's numerics list, no namespace tamper.py watches. Void since the
baseline is timed in a process of its own (compile_baseline.py)."""
from pathlib import Path

import torch
import torch._dynamo.config
import torch._inductor.config
import torch.nn as nn

from stitchcuda import runtime

torch._dynamo.config.disable = True
torch._inductor.config.max_fusion_size = 1
torch._inductor.config.max_autotune = False
torch._inductor.config.triton.cudagraphs = False

_lib = runtime.load(Path(__file__).with_name("kernels.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        _lib.call("affine_relu", x, y, out, x.numel(), float(self.scale))
        return out
