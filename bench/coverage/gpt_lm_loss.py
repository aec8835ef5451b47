import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """GPT LM head + shifted next-token loss with ignore_index=-100 for padding."""
    def __init__(self, d=256, vocab=4096):
        super().__init__()
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
    def forward(self, h, labels):
        logits = self.lm_head(self.ln_f(h))
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1),
                               ignore_index=-100)

def get_inputs():
    labels = torch.randint(0, 4096, (8, 128))
    labels[:, 100:] = -100
    return [torch.randn(8, 128, 256), labels]

def get_init_inputs():
    return [256, 4096]
