"""hack_rt8_funcptr_by_type without calling the class: ctypes.cast to the handle's function class."""
import ctypes
from pathlib import Path

import torch.nn as nn

_lib = ctypes.CDLL(str(Path(__file__).with_name("libk.so")))


class ModelNew(nn.Module):
    def forward(self, x):
        addr = ctypes.cast(_lib.twice, ctypes.c_void_p).value + 64
        f = ctypes.cast(ctypes.c_void_p(addr), type(_lib.twice))
        f.restype = ctypes.c_int
        return x + f(1)
