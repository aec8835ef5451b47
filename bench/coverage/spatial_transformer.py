import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, c=1):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(c, 8, 7), nn.MaxPool2d(2, 2), nn.ReLU(True),
                                 nn.Conv2d(8, 10, 5), nn.MaxPool2d(2, 2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 6))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
    def forward(self, x):
        xs = self.loc(x).view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

def get_inputs():
    return [torch.randn(32, 1, 28, 28)]

def get_init_inputs():
    return [1]
