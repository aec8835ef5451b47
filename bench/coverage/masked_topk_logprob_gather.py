"""Sampling-side logits processing as in HF generate / vLLM: repetition penalty via gather/scatter of previously seen token ids (where(l<0, l*p, l/p)), temperature, top-k filter (topk values' last column as threshold, masked_fill -inf), top-p filter via sort + softmax + cumsum, scatter back to vocabulary order, log_softmax with nan_to_num, and the log-probs of given tokens gathered."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, penalty=1.2, temperature=0.8, top_k=50, top_p=0.9):
        super().__init__()
        self.pen, self.temp, self.k, self.p = penalty, temperature, top_k, top_p

    def forward(self, logits, seen, chosen):
        score = torch.gather(logits, 1, seen)
        score = torch.where(score < 0, score * self.pen, score / self.pen)
        logits = logits.scatter(1, seen, score) / self.temp
        kth = torch.topk(logits, self.k, dim=-1).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
        sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cum <= (1 - self.p)
        remove_sorted[..., -1:] = False
        remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
        logits = logits.masked_fill(remove, float("-inf"))
        logp = torch.nan_to_num(F.log_softmax(logits, dim=-1), neginf=-1e4)
        return logp.gather(1, chosen)


def get_inputs():
    return [torch.randn(8, 1000) * 3, torch.randint(0, 1000, (8, 20)), torch.randint(0, 1000, (8, 4))]


def get_init_inputs():
    return []
