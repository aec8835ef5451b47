import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import spectral_norm

class Model(nn.Module):
    """SNGAN/BigGAN-style discriminator in training mode: every conv and the linear wrapped with torch.nn.utils.parametrizations.spectral_norm (one power iteration per forward updates u, v buffers), LeakyReLU, global sum pooling, projection discriminator term with a class embedding, hinge loss on real/fake."""
    def __init__(self, c=3, ch=32, n_classes=10):
        super().__init__()
        self.convs = nn.ModuleList([
            spectral_norm(nn.Conv2d(c, ch, 3, 1, 1)), spectral_norm(nn.Conv2d(ch, ch * 2, 4, 2, 1)),
            spectral_norm(nn.Conv2d(ch * 2, ch * 2, 3, 1, 1)), spectral_norm(nn.Conv2d(ch * 2, ch * 4, 4, 2, 1)),
        ])
        self.fc = spectral_norm(nn.Linear(ch * 4, 1))
        self.embed = spectral_norm(nn.Embedding(n_classes, ch * 4))

    def score(self, x, y):
        for conv in self.convs:
            x = nn.functional.leaky_relu(conv(x), 0.1)
        h = x.sum(dim=(2, 3))
        return self.fc(h).squeeze(1) + (self.embed(y) * h).sum(1)

    def forward(self, real, fake, y):
        d_real = self.score(real, y)
        d_fake = self.score(fake, y)
        return torch.relu(1.0 - d_real).mean() + torch.relu(1.0 + d_fake).mean()

def get_inputs():
    return [torch.randn(4, 3, 32, 32), torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))]

def get_init_inputs():
    return [3, 32, 10]
