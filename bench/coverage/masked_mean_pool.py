import torch
import torch.nn as nn

class Model(nn.Module):
    """Sentence-transformer pooling head: masked mean over tokens, then normalize."""
    def __init__(self, d=384, out=256):
        super().__init__()
        self.proj = nn.Linear(d, out)
    def forward(self, tok, attention_mask):
        m = attention_mask.unsqueeze(-1).expand(tok.size()).float()
        s = torch.sum(tok * m, 1)
        c = torch.clamp(m.sum(1), min=1e-9)
        return nn.functional.normalize(self.proj(s / c), p=2, dim=1)

def get_inputs():
    lengths = torch.randint(10, 128, (32,))
    mask = (torch.arange(128)[None, :] < lengths[:, None]).long()
    return [torch.randn(32, 128, 384), mask]

def get_init_inputs():
    return [384, 256]
