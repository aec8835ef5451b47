import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Knowledge distillation loss: KL(teacher || student) with temperature, log_target."""
    def __init__(self, T=4.0, alpha=0.7):
        super().__init__()
        self.T, self.alpha = T, alpha
    def forward(self, s_logits, t_logits, labels):
        T = self.T
        kd = F.kl_div(F.log_softmax(s_logits / T, -1), F.log_softmax(t_logits / T, -1),
                      reduction='batchmean', log_target=True) * T * T
        ce = F.cross_entropy(s_logits, labels)
        return self.alpha * kd + (1 - self.alpha) * ce

def get_inputs():
    return [torch.randn(256, 1000), torch.randn(256, 1000), torch.randint(0, 1000, (256,))]

def get_init_inputs():
    return [4.0, 0.7]
