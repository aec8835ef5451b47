import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Discrete latent head: in eval, hard Gumbel-softmax reduces to argmax -> one_hot -> codebook matmul."""
    def __init__(self, d=256, n_codes=512, cd=64):
        super().__init__()
        self.logits = nn.Linear(d, n_codes)
        self.codebook = nn.Parameter(torch.randn(n_codes, cd))
        self.eval()
    def forward(self, x):
        logits = self.logits(x)
        if self.training:
            y = F.gumbel_softmax(logits, tau=1.0, hard=True)
        else:
            idx = logits.argmax(dim=-1)
            y = F.one_hot(idx, logits.size(-1)).type_as(logits)
        return y @ self.codebook

def get_inputs():
    return [torch.randn(16, 64, 256)]

def get_init_inputs():
    return [256, 512, 64]
