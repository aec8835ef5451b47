import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """ASR CTC head: Linear to vocab, log_softmax, transpose to (T, B, V), F.ctc_loss with int64 targets and lengths, mean reduction, zero_infinity."""
    def __init__(self, d=256, vocab=32):
        super().__init__()
        self.proj = nn.Linear(d, vocab)
    def forward(self, enc, targets, input_lengths, target_lengths):
        logp = self.proj(enc).log_softmax(-1).transpose(0, 1)
        return F.ctc_loss(logp, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=True)

def get_inputs():
    return [torch.randn(4, 200, 256), torch.randint(1, 32, (4, 40), dtype=torch.int64),
            torch.tensor([200, 180, 150, 120], dtype=torch.int64), torch.tensor([40, 35, 30, 20], dtype=torch.int64)]

def get_init_inputs():
    return [256, 32]
