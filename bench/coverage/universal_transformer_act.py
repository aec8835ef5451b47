import torch
import torch.nn as nn

class Model(nn.Module):
    """Adaptive Computation Time (Universal Transformer) as in the tensor2tensor port: a while loop on ((halting_probability < threshold) & (n_updates < max_hop)).byte().any(), halting unit sigmoid, remainders, update weights, shared transition layer."""
    def __init__(self, d=64, max_hop=6, threshold=0.99):
        super().__init__()
        self.p = nn.Linear(d, 1)
        self.p.bias.data.fill_(1.0)
        self.fn = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.max_hop, self.threshold = max_hop, threshold

    def forward(self, state):
        halting_probability = torch.zeros(state.shape[0], state.shape[1], device=state.device)
        remainders = torch.zeros_like(halting_probability)
        n_updates = torch.zeros_like(halting_probability)
        previous_state = torch.zeros_like(state)
        step = 0
        while ((halting_probability < self.threshold) & (n_updates < self.max_hop)).byte().any():
            p = torch.sigmoid(self.p(state)).squeeze(-1)
            still_running = (halting_probability < 1.0).float()
            new_halted = (halting_probability + p * still_running > self.threshold).float() * still_running
            still_running = (halting_probability + p * still_running <= self.threshold).float() * still_running
            halting_probability = halting_probability + p * still_running
            remainders = remainders + new_halted * (1 - halting_probability)
            halting_probability = halting_probability + new_halted * remainders
            n_updates = n_updates + still_running + new_halted
            update_weights = p * still_running + new_halted * remainders
            state = state + self.fn(state)
            previous_state = (state * update_weights.unsqueeze(-1)) + (previous_state * (1 - update_weights.unsqueeze(-1)))
            step += 1
        return previous_state, (remainders, n_updates)

def get_inputs():
    return [torch.randn(4, 20, 64)]

def get_init_inputs():
    return [64, 6, 0.99]
