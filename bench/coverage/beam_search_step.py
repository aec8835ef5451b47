import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """One beam-search step as in fairseq/HF generate: decoder state -> log_softmax, add running beam scores, length-penalised, flatten (beam*vocab), topk(2*beam), beam index by floor_divide (rounding_mode='floor'), token by remainder, reorder hidden states with gather/index_select on flattened batch*beam, eos finished mask."""
    def __init__(self, d=64, vocab=400, beam=4, eos=2):
        super().__init__()
        self.beam, self.vocab, self.eos = beam, vocab, eos
        self.proj = nn.Linear(d, vocab)
        self.cell = nn.GRUCell(d, d)

    def forward(self, hidden, beam_scores, inp, step_len):
        # hidden: (B*beam, d), beam_scores: (B, beam)
        BB, d = hidden.shape
        B = BB // self.beam
        h = self.cell(inp, hidden)
        lprobs = F.log_softmax(self.proj(h), dim=-1).view(B, self.beam, self.vocab)
        scores = (lprobs + beam_scores.unsqueeze(-1)) / step_len ** 1.0
        top_scores, top_idx = torch.topk(scores.view(B, -1), 2 * self.beam, dim=1)
        beam_idx = torch.div(top_idx, self.vocab, rounding_mode="floor")
        token_idx = top_idx % self.vocab
        finished = token_idx.eq(self.eos)
        next_scores = top_scores.masked_fill(finished, -1e9)
        keep_scores, keep = next_scores.topk(self.beam, dim=1)
        sel_beam = torch.gather(beam_idx, 1, keep)
        sel_tok = torch.gather(token_idx, 1, keep)
        flat = (sel_beam + torch.arange(B, device=h.device).unsqueeze(1) * self.beam).view(-1)
        new_h = h.index_select(0, flat)
        return new_h, keep_scores, sel_tok

def get_inputs():
    return [torch.randn(8 * 4, 64), torch.randn(8, 4), torch.randn(8 * 4, 64), torch.tensor(3.0)]

def get_init_inputs():
    return [64, 400, 4, 2]
