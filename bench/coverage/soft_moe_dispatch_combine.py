import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Soft MoE layer (Puigcerver et al. 2023, as in lucidrains soft-moe-pytorch) in bf16: RMS-normalised tokens and
    slot embeddings, logits einsum('b n d, e s d -> b n e s'), dispatch weights softmax over tokens and combine
    weights softmax over all (expert, slot) pairs via rearrange to (b, n, e*s), slots = einsum over tokens, per-expert
    SwiGLU FFN from stacked (E, d, h) Parameters via einsum('besd,edh->besh'), outputs combined back to tokens."""
    def __init__(self, d=256, experts=8, slots=4, hidden=512):
        super().__init__()
        self.E, self.S = experts, slots
        self.norm = nn.RMSNorm(d)
        self.slot_norm = nn.RMSNorm(d)
        self.slot_embeds = nn.Parameter(torch.randn(experts, slots, d) * 0.02)
        self.w_gate = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w_up = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w_down = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)
        self.to(torch.bfloat16)

    def forward(self, x):
        b, n, d = x.shape
        xn = self.norm(x)
        slot_embeds = self.slot_norm(self.slot_embeds)
        logits = torch.einsum("bnd,esd->bnes", xn, slot_embeds)
        dispatch = logits.softmax(dim=1)
        combine = logits.reshape(b, n, -1).softmax(dim=-1)
        slots = torch.einsum("bnd,bnes->besd", xn, dispatch)
        hdn = F.silu(torch.einsum("besd,edh->besh", slots, self.w_gate)) * torch.einsum("besd,edh->besh", slots, self.w_up)
        out = torch.einsum("besh,ehd->besd", hdn, self.w_down)
        out = out.reshape(b, -1, d)
        return x + torch.einsum("bsd,bns->bnd", out, combine)


def get_inputs():
    return [torch.randn(16, 256, 256).bfloat16()]


def get_init_inputs():
    return [256, 8, 4, 512]
