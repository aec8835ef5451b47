"""PointNet's shared MLP over points (1x1 Conv1d with batch norm and ReLU, 3 -> 64 -> 128 -> 1024),
a max over the points, then a classifier head of Linears with batch norm."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, classes: int = 40):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 1024, 1), nn.BatchNorm1d(1024), nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.ReLU(),
            nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(),
            nn.Linear(256, classes),
        )

    def forward(self, x):
        return self.head(self.mlp(x).max(dim=2).values)


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 3, 2048)]


def get_init_inputs():
    return []
