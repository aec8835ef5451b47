import torch
import torch.nn as nn
import torch.nn.functional as F

def squash(s, dim=-1):
    n2 = (s ** 2).sum(dim=dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

class Model(nn.Module):
    """CapsNet (Sabour et al.): conv -> primary capsules (conv, view, squash), prediction vectors u_hat = W @ u via broadcasting matmul with a (1, in_caps, out_caps, out_dim, in_dim) weight, 3 routing iterations (softmax over output capsules, weighted sum, squash, agreement update; u_hat.detach() in non-final iterations), margin loss with one-hot targets via torch.eye indexing."""
    def __init__(self, in_caps_ch=8, n_out=10, out_dim=16, iters=3):
        super().__init__()
        self.iters = iters
        self.conv1 = nn.Conv2d(1, 64, 9)
        self.primary = nn.Conv2d(64, 8 * in_caps_ch, 9, stride=2)
        self.in_caps = in_caps_ch * 6 * 6
        self.W = nn.Parameter(0.01 * torch.randn(1, self.in_caps, n_out, out_dim, 8))
        self.n_out = n_out

    def forward(self, x, y):
        h = F.relu(self.conv1(x))
        u = self.primary(h)
        B = u.shape[0]
        u = u.view(B, 8, -1).transpose(1, 2)
        u = squash(u)
        u_hat = torch.matmul(self.W, u[:, :, None, :, None]).squeeze(-1)   # B, in, out, 16
        b = torch.zeros(B, self.in_caps, self.n_out, device=x.device)
        for i in range(self.iters):
            c = F.softmax(b, dim=2)
            if i == self.iters - 1:
                v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))
            else:
                v = squash((c.unsqueeze(-1) * u_hat.detach()).sum(dim=1))
                b = b + (u_hat.detach() * v.unsqueeze(1)).sum(-1)
        lengths = v.norm(dim=-1)
        T = torch.eye(self.n_out, device=x.device)[y]
        loss = T * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - T) * F.relu(lengths - 0.1) ** 2
        return loss.sum(1).mean(), lengths

def get_inputs():
    return [torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))]

def get_init_inputs():
    return [8, 10, 16, 3]
