"""A foreign function called at an address made from another's: type(handle.symbol)(address) is the
handle's function-pointer class (_FuncPtr, which the static reading names) reached without its name."""
import ctypes
from pathlib import Path

import torch.nn as nn

_lib = ctypes.CDLL(str(Path(__file__).with_name("libk.so")))
_any = type(_lib.twice)


class ModelNew(nn.Module):
    def forward(self, x):
        f = _any(ctypes.cast(_lib.twice, ctypes.c_void_p).value + 64)
        f.restype = ctypes.c_int
        return x + f(1)
