import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

class Model(nn.Module):
    """BiLSTM sequence tagger as in countless tutorials: embeddings with padding_idx=0, pack_padded_sequence(lengths, enforce_sorted=False), 2-layer bidirectional LSTM, pad_packed_sequence(total_length=T), dropout (eval), linear tag scores."""
    def __init__(self, vocab=300, emb=32, hid=48, ntags=9):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hid, num_layers=2, batch_first=True, bidirectional=True, dropout=0.2)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(2 * hid, ntags)
        self.eval()

    def forward(self, tokens, lengths):
        T = tokens.size(1)
        x = self.drop(self.embed(tokens))
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
        return self.fc(self.drop(out))

def get_inputs():
    return [torch.randint(1, 300, (4, 25)), torch.tensor([25, 20, 13, 7])]

def get_init_inputs():
    return [300, 32, 48, 9]
