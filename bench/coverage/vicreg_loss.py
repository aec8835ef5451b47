import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """VICReg loss: invariance MSE, variance hinge on sqrt(var+eps), covariance off-diagonal via (1 - eye) mask, plus an orthogonality regulariser ||W W^T - I||_F via linalg.norm and trace."""
    def __init__(self, d=256, sim=25.0, std=25.0, cov=1.0):
        super().__init__()
        self.sim, self.std, self.cov = sim, std, cov
        self.expander = nn.Linear(d, d)
    def forward(self, x, y):
        x, y = self.expander(x), self.expander(y)
        N, D = x.shape
        repr_loss = F.mse_loss(x, y)
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)
        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
        cov_x = (x.T @ x) / (N - 1)
        cov_y = (y.T @ y) / (N - 1)
        off = 1 - torch.eye(D, device=x.device)
        cov_loss = (cov_x * off).pow(2).sum() / D + (cov_y * off).pow(2).sum() / D
        W = self.expander.weight
        ortho = torch.linalg.norm(W @ W.T - torch.eye(D, device=W.device), ord="fro") + 1e-3 * torch.trace(W @ W.T)
        return self.sim * repr_loss + self.std * std_loss + self.cov * cov_loss + ortho

def get_inputs():
    return [torch.randn(128, 256), torch.randn(128, 256)]

def get_init_inputs():
    return [256, 25.0, 25.0, 1.0]
