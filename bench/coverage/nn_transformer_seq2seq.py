import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, vocab=1000, d=128, h=4, L=2):
        super().__init__()
        self.src_emb = nn.Embedding(vocab, d)
        self.tgt_emb = nn.Embedding(vocab, d)
        self.tf = nn.Transformer(d, h, L, L, 4 * d, dropout=0.1, batch_first=True)
        self.gen = nn.Linear(d, vocab)
        self.eval()
    def forward(self, src, tgt):
        T = tgt.size(1)
        tgt_mask = self.tf.generate_square_subsequent_mask(T, device=tgt.device)
        y = self.tf(self.src_emb(src), self.tgt_emb(tgt), tgt_mask=tgt_mask)
        return self.gen(y)

def get_inputs():
    return [torch.randint(0, 1000, (8, 64)), torch.randint(0, 1000, (8, 48))]

def get_init_inputs():
    return [1000, 128, 4, 2]
