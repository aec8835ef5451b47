"""Attack: pop the dispatch-mode stack with torch._C's own function called from C (map, inside
list: no profile event for the call), compute with PyTorch, push the modes back the same way."""
import torch
import torch.nn as nn

_C = getattr(torch, "_" + "C")
_pop = getattr(_C, "_pop_torch" + "_dispatch_stack")
_push = getattr(_C, "_push_on_torch" + "_dispatch_stack")
_len = getattr(_C, "_len_torch" + "_dispatch_stack")
_relu = getattr(torch, "re" + "lu")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        held = list(map(_pop, [None] * _len()))
        out = _relu(x * self.scale + y)
        list(map(_push, reversed(held)))
        return out
