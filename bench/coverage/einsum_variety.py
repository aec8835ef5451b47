import torch
import torch.nn as nn

class Model(nn.Module):
    """A grab-bag of einsum forms users write: batched projection 'bnd,hde->bhne', scores 'bhid,bhjd->bhij', weighted sum 'bhij,bhjd->bhid', outer 'bi,bj->bij', diagonal 'bii->bi', bilinear 'bi,oij,bj->bo'."""
    def __init__(self, d=64, h=4, e=16, o=8):
        super().__init__()
        self.wp = nn.Parameter(torch.randn(h, d, e) * 0.1)
        self.bil = nn.Parameter(torch.randn(o, e, e) * 0.1)
    def forward(self, x):
        p = torch.einsum('bnd,hde->bhne', x, self.wp)
        s = torch.einsum('bhid,bhjd->bhij', p, p).softmax(-1)
        y = torch.einsum('bhij,bhjd->bhid', s, p)
        pooled = y.mean(dim=(1, 2))
        outer = torch.einsum('bi,bj->bij', pooled, pooled)
        diag = torch.einsum('bii->bi', outer)
        bil = torch.einsum('bi,oij,bj->bo', pooled, self.bil, diag)
        return y.sum(1), bil

def get_inputs():
    return [torch.randn(8, 100, 64)]

def get_init_inputs():
    return [64, 4, 16, 8]
