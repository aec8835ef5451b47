import math
import torch
import torch.nn as nn

def mel_filterbank(n_freqs, n_mels, sr):
    def hz2mel(f): return 2595.0 * math.log10(1.0 + f / 700.0)
    m = torch.linspace(hz2mel(0.0), hz2mel(sr / 2), n_mels + 2)
    f = 700.0 * (10 ** (m / 2595.0) - 1.0)
    all_f = torch.linspace(0, sr // 2, n_freqs)
    slopes = f[None, :] - all_f[:, None]
    down = -slopes[:, :-2] / (f[1:-1] - f[:-2])
    up = slopes[:, 2:] / (f[2:] - f[1:-1])
    return torch.clamp(torch.min(down, up), min=0.0)

class Model(nn.Module):
    """Log-mel frontend without FFT: frames via Tensor.unfold, Hann window, real DFT as two matmuls, power, fixed mel filterbank, log(clamp), per-utterance normalisation."""
    def __init__(self, n_fft=400, hop=160, n_mels=80, sr=16000):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        n_freqs = n_fft // 2 + 1
        t = torch.arange(n_fft, dtype=torch.float32)
        k = torch.arange(n_freqs, dtype=torch.float32)
        ang = 2 * math.pi * k[:, None] * t[None, :] / n_fft
        self.register_buffer("cos_m", torch.cos(ang).T.contiguous())
        self.register_buffer("sin_m", -torch.sin(ang).T.contiguous())
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("fb", mel_filterbank(n_freqs, n_mels, sr))
    def forward(self, wav):
        frames = wav.unfold(-1, self.n_fft, self.hop) * self.window
        re = frames @ self.cos_m
        im = frames @ self.sin_m
        power = re.pow(2) + im.pow(2)
        mel = torch.matmul(power, self.fb)
        logmel = torch.log(torch.clamp(mel, min=1e-10))
        mean = logmel.mean(dim=1, keepdim=True)
        std = logmel.std(dim=1, keepdim=True)
        return ((logmel - mean) / (std + 1e-5)).transpose(1, 2)

def get_inputs():
    return [torch.randn(4, 16000)]

def get_init_inputs():
    return [400, 160, 80, 16000]
