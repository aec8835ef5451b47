import torch
import torch.nn as nn

class Model(nn.Module):
    """SAGAN / BigGAN self-attention: spectral-norm-free 1x1 query/key/value convs, maxpooled keys/values, bmm, softmax, learnable gamma (init 0.5 here) residual."""
    def __init__(self, c=128):
        super().__init__()
        self.theta = nn.Conv2d(c, c // 8, 1, bias=False)
        self.phi = nn.Conv2d(c, c // 8, 1, bias=False)
        self.g = nn.Conv2d(c, c // 2, 1, bias=False)
        self.o = nn.Conv2d(c // 2, c, 1, bias=False)
        self.gamma = nn.Parameter(torch.tensor(0.5))
    def forward(self, x):
        B, C, H, W = x.shape
        theta = self.theta(x).view(B, C // 8, H * W)
        phi = nn.functional.max_pool2d(self.phi(x), 2).view(B, C // 8, H * W // 4)
        g = nn.functional.max_pool2d(self.g(x), 2).view(B, C // 2, H * W // 4)
        beta = torch.softmax(torch.bmm(theta.transpose(1, 2), phi), -1)
        o = self.o(torch.bmm(g, beta.transpose(1, 2)).view(B, C // 2, H, W))
        return self.gamma * o + x

def get_inputs():
    return [torch.randn(4, 128, 32, 32)]

def get_init_inputs():
    return [128]
