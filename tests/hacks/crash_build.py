"""A candidate whose kernel does not compile."""

from pathlib import Path

import torch.nn as nn

from stitchcuda import runtime

_lib = runtime.load(Path(__file__).with_name("broken.cpp"))


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x, y):
        return x
