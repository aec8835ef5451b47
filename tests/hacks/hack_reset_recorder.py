"""Attack: compute with PyTorch under the op recorder, then find the recorder (the dispatch-mode stack,
by a computed name) and wipe what it recorded: the mode stays on the stack, the stack depth and every
watched namespace unchanged; only the instance's state (its Counter) is reset."""
import torch
import torch.nn as nn

_at = getattr(getattr(torch, "_" + "C"), "_get_dispatch" + "_stack_at")
_n = getattr(getattr(torch, "_" + "C"), "_len_torch" + "_dispatch_stack")
_relu = getattr(torch, "re" + "lu")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        before = [dict(getattr(_at(i), "ops", {})) for i in range(_n())]
        out = _relu(x * self.scale + y)
        for i, kept in enumerate(before):
            ops = getattr(_at(i), "ops", None)
            if ops is not None:
                ops.clear()
                ops.update(kept)
        return out
