import torch
import torch.nn as nn

class Model(nn.Module):
    """Linear-chain CRF negative log-likelihood (pytorch-crf style): emissions from a Linear, gold path score with transitions[tags[i-1], tags[i]] and emissions.gather, forward algorithm in a Python loop over time with torch.logsumexp and torch.where(mask) carry-over, end transitions, mean NLL."""
    def __init__(self, d=64, num_tags=7):
        super().__init__()
        self.emit = nn.Linear(d, num_tags)
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def _score(self, emissions, tags, mask):
        seq_length, batch_size = tags.shape
        mask = mask.float()
        score = self.start_transitions[tags[0]]
        score = score + emissions[0, torch.arange(batch_size), tags[0]]
        for i in range(1, seq_length):
            score = score + self.transitions[tags[i - 1], tags[i]] * mask[i]
            score = score + emissions[i, torch.arange(batch_size), tags[i]] * mask[i]
        seq_ends = mask.long().sum(dim=0) - 1
        last_tags = tags[seq_ends, torch.arange(batch_size)]
        return score + self.end_transitions[last_tags]

    def _normalizer(self, emissions, mask):
        seq_length = emissions.size(0)
        score = self.start_transitions + emissions[0]
        for i in range(1, seq_length):
            next_score = score.unsqueeze(2) + self.transitions + emissions[i].unsqueeze(1)
            next_score = torch.logsumexp(next_score, dim=1)
            score = torch.where(mask[i].unsqueeze(1), next_score, score)
        return torch.logsumexp(score + self.end_transitions, dim=1)

    def forward(self, feats, tags, mask):
        emissions = self.emit(feats).transpose(0, 1)   # T, B, K
        tags, mask = tags.transpose(0, 1), mask.transpose(0, 1)
        llh = self._score(emissions, tags, mask) - self._normalizer(emissions, mask)
        return -llh.mean()

def get_inputs():
    mask = torch.ones(4, 16, dtype=torch.bool)
    mask[1, 12:] = False
    mask[3, 9:] = False
    return [torch.randn(4, 16, 64), torch.randint(0, 7, (4, 16)), mask]

def get_init_inputs():
    return [64, 7]
