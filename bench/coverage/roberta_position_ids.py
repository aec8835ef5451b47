import torch
import torch.nn as nn

def create_position_ids_from_input_ids(input_ids, padding_idx, past_key_values_length=0):
    mask = input_ids.ne(padding_idx).int()
    incremental_indices = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
    return incremental_indices.long() + padding_idx

class Model(nn.Module):
    """HF RoBERTa embeddings: position ids from cumsum of the non-pad mask, word + position (padding_idx) + token type embeddings, LayerNorm."""
    def __init__(self, vocab=30000, d=256, max_pos=514, pad=1):
        super().__init__()
        self.pad = pad
        self.word = nn.Embedding(vocab, d, padding_idx=pad)
        self.pos = nn.Embedding(max_pos, d, padding_idx=pad)
        self.tok = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-5)
    def forward(self, input_ids):
        pos_ids = create_position_ids_from_input_ids(input_ids, self.pad)
        tt = torch.zeros_like(input_ids)
        return self.ln(self.word(input_ids) + self.pos(pos_ids) + self.tok(tt))

def get_inputs():
    ids = torch.randint(2, 30000, (8, 128), dtype=torch.int64)
    ids[:, 100:] = 1
    return [ids]

def get_init_inputs():
    return [30000, 256, 514, 1]
