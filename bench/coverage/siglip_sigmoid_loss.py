import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SigLIP pairwise sigmoid loss (big_vision / open_clip SigLipLoss): projection heads, L2 normalise,
    logits = scale.exp() * img @ txt.T + bias, labels 2 * eye - 1 (built with torch.eye and ones arithmetic),
    loss = -F.logsigmoid(labels * logits).sum() / n."""
    def __init__(self, d_img=768, d_txt=512, d=256):
        super().__init__()
        self.img_proj = nn.Linear(d_img, d, bias=False)
        self.txt_proj = nn.Linear(d_txt, d, bias=False)
        self.logit_scale = nn.Parameter(torch.ones([]) * torch.log(torch.tensor(10.0)))
        self.logit_bias = nn.Parameter(torch.ones([]) * -10.0)

    def forward(self, img_feat, txt_feat):
        img = F.normalize(self.img_proj(img_feat), dim=-1)
        txt = F.normalize(self.txt_proj(txt_feat), dim=-1)
        logits = self.logit_scale.exp() * img @ txt.T + self.logit_bias
        n = logits.shape[0]
        labels = 2 * torch.eye(n, device=logits.device, dtype=logits.dtype) - torch.ones(n, n, device=logits.device, dtype=logits.dtype)
        return -F.logsigmoid(labels * logits).sum() / n


def get_inputs():
    return [torch.randn(256, 768), torch.randn(256, 512)]


def get_init_inputs():
    return [768, 512, 256]
