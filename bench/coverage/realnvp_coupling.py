import torch
import torch.nn as nn

class Model(nn.Module):
    """RealNVP forward pass (density estimation): checkerboard / channel masks as buffers, s and t nets (conv, ReLU), s = scale * tanh(s), y = x*m + (1-m)*(x*exp(s) + t), log|det J| accumulated as sum over (C,H,W), squeeze (space-to-depth via view/permute) between scales, standard normal log-prob and bits/dim."""
    def __init__(self, c=3, hid=32, H=16):
        super().__init__()
        yy, xx = torch.meshgrid(torch.arange(H), torch.arange(H), indexing="ij")
        cb = ((yy + xx) % 2).float().view(1, 1, H, H)
        self.register_buffer("masks", torch.stack([cb, 1 - cb, cb]))
        def net(cin):
            return nn.Sequential(nn.Conv2d(cin, hid, 3, padding=1), nn.ReLU(), nn.Conv2d(hid, hid, 3, padding=1), nn.ReLU(), nn.Conv2d(hid, 2 * cin, 3, padding=1))
        self.nets = nn.ModuleList(net(c) for _ in range(3))
        self.scales = nn.Parameter(torch.ones(3, c, 1, 1))
        self.post = nn.ModuleList(net(4 * c) for _ in range(2))
        self.post_scale = nn.Parameter(torch.ones(2, 4 * c, 1, 1))

    def couple(self, x, mask, net, scale):
        s, t = net(x * mask).chunk(2, dim=1)
        s = scale * torch.tanh(s) * (1 - mask)
        t = t * (1 - mask)
        y = x * torch.exp(s) + t
        return y, s.flatten(1).sum(-1)

    @staticmethod
    def squeeze(x):
        b, c, h, w = x.shape
        x = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
        return x.reshape(b, c * 4, h // 2, w // 2)

    def forward(self, x):
        x = (x * 255.0 + torch.rand_like(x)) / 256.0
        x = torch.logit(0.05 + 0.9 * x)
        ldj = torch.zeros(x.size(0), device=x.device)
        for i in range(3):
            x, l = self.couple(x, self.masks[i], self.nets[i], self.scales[i])
            ldj = ldj + l
        x = self.squeeze(x)
        c = x.size(1)
        chmask = torch.cat([torch.ones(c // 2), torch.zeros(c - c // 2)]).view(1, c, 1, 1).to(x)
        for i in range(2):
            m = chmask if i % 2 == 0 else 1 - chmask
            x, l = self.couple(x, m, self.post[i], self.post_scale[i])
            ldj = ldj + l
        prior = -0.5 * (x ** 2 + torch.log(torch.tensor(2 * torch.pi))).flatten(1).sum(-1)
        nll = -(prior + ldj)
        return (nll / (x[0].numel() * torch.log(torch.tensor(2.0)))).mean()

def get_inputs():
    return [torch.rand(4, 3, 16, 16)]

def get_init_inputs():
    return [3, 32, 16]
