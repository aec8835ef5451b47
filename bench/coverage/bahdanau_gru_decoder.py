import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Bahdanau attention decoder with teacher forcing: bidirectional GRU encoder, then a Python loop over target steps with nn.GRUCell, additive attention (tanh(W_s s + W_h H) v) with source padding masked_fill, context concat, vocab projection; returns stacked log-probs."""
    def __init__(self, vocab=200, emb=32, hid=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.encoder = nn.GRU(emb, hid, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * hid, hid)
        self.W_h = nn.Linear(2 * hid, hid, bias=False)
        self.W_s = nn.Linear(hid, hid)
        self.v = nn.Linear(hid, 1, bias=False)
        self.cell = nn.GRUCell(emb + 2 * hid, hid)
        self.out = nn.Linear(hid + 2 * hid, vocab)

    def forward(self, src, src_mask, tgt):
        H, h_n = self.encoder(self.embed(src))
        s = torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], dim=-1)))
        keys = self.W_h(H)
        emb = self.embed(tgt)
        outs = []
        for t in range(tgt.size(1)):
            e = self.v(torch.tanh(keys + self.W_s(s).unsqueeze(1))).squeeze(-1)
            e = e.masked_fill(~src_mask, float("-inf"))
            a = F.softmax(e, dim=-1)
            ctx = torch.bmm(a.unsqueeze(1), H).squeeze(1)
            s = self.cell(torch.cat([emb[:, t], ctx], dim=-1), s)
            outs.append(F.log_softmax(self.out(torch.cat([s, ctx], dim=-1)), dim=-1))
        return torch.stack(outs, dim=1)

def get_inputs():
    mask = torch.ones(4, 20, dtype=torch.bool)
    mask[:, 15:] = False
    return [torch.randint(0, 200, (4, 20)), mask, torch.randint(0, 200, (4, 12))]

def get_init_inputs():
    return [200, 32, 64]
