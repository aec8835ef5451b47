"""A candidate that takes host memory without bound (capped at 8 GiB so that a broken watchdog
fails the test by its timeout rather than taking the machine down)."""

import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.hoard = []

    def forward(self, x, y):
        while len(self.hoard) < 32:
            self.hoard.append(torch.ones(64 << 20))  # 256 MiB, every page touched
        time.sleep(600)
