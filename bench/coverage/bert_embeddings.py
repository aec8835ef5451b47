import torch
import torch.nn as nn

class Model(nn.Module):
    """HuggingFace BertEmbeddings: position_ids/token_type_ids buffers, sum of three embeddings, LayerNorm."""
    def __init__(self, vocab=30522, d=256, max_pos=512, types=2):
        super().__init__()
        self.word = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Embedding(max_pos, d)
        self.tok_type = nn.Embedding(types, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)
        self.eval()
    def forward(self, input_ids):
        L = input_ids.size(1)
        pos_ids = self.position_ids[:, :L]
        tt = self.token_type_ids[:, :L].expand(input_ids.size(0), L)
        e = self.word(input_ids) + self.tok_type(tt) + self.pos(pos_ids)
        return self.dropout(self.LayerNorm(e))

def get_inputs():
    return [torch.randint(0, 30522, (16, 128))]

def get_init_inputs():
    return [30522, 256, 512, 2]
