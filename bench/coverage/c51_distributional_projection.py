import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """C51 distributional DQN loss (CleanRL / Dopamine style): online and target nets output (B, A, atoms) softmax
    distributions, greedy next action by argmax of the expected value (sum p * support), gather of that action's
    distribution, Bellman projection Tz = r + gamma * (1 - done) * z clamped to [v_min, v_max], b = (Tz - v_min) / dz,
    l = floor, u = ceil (int64), fix for l == u, mass split to neighbours with index_add_ on a flattened
    (B * atoms) with offsets = arange(B) * atoms, cross-entropy against the chosen action's log-probs."""
    def __init__(self, obs=64, actions=8, atoms=51, v_min=-10.0, v_max=10.0, gamma=0.99):
        super().__init__()
        self.A, self.N, self.v_min, self.v_max, self.gamma = actions, atoms, v_min, v_max, gamma
        self.register_buffer("support", torch.linspace(v_min, v_max, atoms))
        self.dz = (v_max - v_min) / (atoms - 1)
        self.net = nn.Sequential(nn.Linear(obs, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, actions * atoms))
        self.target = nn.Sequential(nn.Linear(obs, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, actions * atoms))

    def forward(self, obs, actions, rewards, next_obs, dones):
        B = obs.shape[0]
        with torch.no_grad():
            next_pmfs = F.softmax(self.target(next_obs).view(B, self.A, self.N), dim=2)
            next_q = (next_pmfs * self.support).sum(2)
            next_act = torch.argmax(next_q, dim=1)
            next_pmf = next_pmfs[torch.arange(B, device=obs.device), next_act]
            Tz = rewards.unsqueeze(-1) + self.gamma * self.support * (1 - dones.unsqueeze(-1))
            Tz = Tz.clamp(self.v_min, self.v_max)
            b = (Tz - self.v_min) / self.dz
            l = b.floor().long()
            u = b.ceil().long()
            l[(u > 0) & (l == u)] -= 1
            u[(l < (self.N - 1)) & (l == u)] += 1
            offset = (torch.arange(B, device=obs.device) * self.N).unsqueeze(1).expand(B, self.N)
            proj = torch.zeros(B * self.N, device=obs.device)
            proj.index_add_(0, (l + offset).view(-1), (next_pmf * (u.float() - b)).view(-1))
            proj.index_add_(0, (u + offset).view(-1), (next_pmf * (b - l.float())).view(-1))
            proj = proj.view(B, self.N)
        logp = F.log_softmax(self.net(obs).view(B, self.A, self.N), dim=2)
        logp_a = logp.gather(1, actions.view(B, 1, 1).expand(B, 1, self.N)).squeeze(1)
        return -(proj * logp_a).sum(-1).mean()


def get_inputs():
    B = 256
    return [torch.randn(B, 64), torch.randint(0, 8, (B,)), torch.randn(B), torch.randn(B, 64), (torch.rand(B) < 0.1).float()]


def get_init_inputs():
    return [64, 8, 51, -10.0, 10.0, 0.99]
