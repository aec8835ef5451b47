import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Seq2seq LM head metrics: shifted labels with -100 padding, F.cross_entropy(ignore_index=-100) mean, per-token loss with reduction='none' masked to average per sequence, perplexity exp(loss), token accuracy from argmax over non-ignored positions."""
    def __init__(self, d=64, vocab=500):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, hidden, labels):
        logits = self.lm_head(self.ln(hidden))
        shift_logits = logits[:, :-1, :].contiguous()
        shift_labels = labels[:, 1:].contiguous()
        V = shift_logits.size(-1)
        loss = F.cross_entropy(shift_logits.view(-1, V), shift_labels.view(-1), ignore_index=-100)
        tok = F.cross_entropy(shift_logits.view(-1, V), shift_labels.view(-1), ignore_index=-100, reduction="none").view_as(shift_labels)
        mask = shift_labels.ne(-100)
        seq_loss = (tok * mask).sum(1) / mask.sum(1).clamp(min=1)
        ppl = torch.exp(loss)
        correct = (shift_logits.argmax(-1) == shift_labels) & mask
        acc = correct.sum().float() / mask.sum().float()
        return loss, seq_loss, ppl, acc

def get_inputs():
    labels = torch.randint(0, 500, (4, 48))
    labels[:, 40:] = -100
    return [torch.randn(4, 48, 64), labels]

def get_init_inputs():
    return [64, 500]
