"""A message-passing graph convolution: a Linear of each edge's source node, the messages summed at
their target nodes (index_add_), a self-connection, ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 128):
        super().__init__()
        self.message = nn.Linear(dim, dim)
        self.update = nn.Linear(dim, dim)

    def forward(self, x, src, dst):
        msg = self.message(x)[src]
        agg = torch.zeros_like(x).index_add_(0, dst, msg)
        return torch.relu(agg + self.update(x))


nodes, edges = 16384, 131072


def get_inputs():
    return [torch.randn(nodes, 128), torch.randint(0, nodes, (edges,)), torch.randint(0, nodes, (edges,))]


def get_init_inputs():
    return []
