import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n_codes=512, dim=64, beta=0.25):
        super().__init__()
        self.embedding = nn.Embedding(n_codes, dim)
        self.embedding.weight.data.uniform_(-1 / n_codes, 1 / n_codes)
        self.beta = beta
    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()
        flat = z.view(-1, z.shape[-1])
        d = (flat ** 2).sum(1, keepdim=True) + (self.embedding.weight ** 2).sum(1) \
            - 2 * flat @ self.embedding.weight.t()
        idx = torch.argmin(d, dim=1)
        zq = self.embedding(idx).view(z.shape)
        loss = self.beta * torch.mean((zq.detach() - z) ** 2) + torch.mean((zq - z.detach()) ** 2)
        zq = z + (zq - z).detach()
        return zq.permute(0, 3, 1, 2).contiguous(), loss

def get_inputs():
    return [torch.randn(8, 64, 32, 32)]

def get_init_inputs():
    return [512, 64, 0.25]
