import torch
import torch.nn as nn

class Model(nn.Module):
    """PPO actor-critic update loss: GAE computed with a reversed Python loop over time, torch.distributions.Categorical(logits=...) log_prob and entropy, ratio exp(new - old), clipped surrogate via torch.min / torch.clamp, value clipping, advantage normalisation."""
    def __init__(self, obs=16, n_act=6, hid=64, gamma=0.99, lam=0.95, clip=0.2):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(obs, hid), nn.Tanh(), nn.Linear(hid, hid), nn.Tanh(), nn.Linear(hid, n_act))
        self.critic = nn.Sequential(nn.Linear(obs, hid), nn.Tanh(), nn.Linear(hid, 1))
        self.gamma, self.lam, self.clip = gamma, lam, clip

    def forward(self, obs, actions, old_logp, old_values, rewards, dones):
        T, N = rewards.shape
        with torch.no_grad():
            adv = torch.zeros_like(rewards)
            last = torch.zeros(N, device=obs.device)
            for t in reversed(range(T)):
                next_v = old_values[t + 1] if t + 1 < T else torch.zeros(N, device=obs.device)
                delta = rewards[t] + self.gamma * next_v * (1 - dones[t]) - old_values[t]
                last = delta + self.gamma * self.lam * (1 - dones[t]) * last
                adv[t] = last
            returns = adv + old_values
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        logp = dist.log_prob(actions)
        ratio = torch.exp(logp - old_logp)
        pg = -torch.min(ratio * adv, torch.clamp(ratio, 1 - self.clip, 1 + self.clip) * adv).mean()
        v = self.critic(obs).squeeze(-1)
        v_clipped = old_values + torch.clamp(v - old_values, -self.clip, self.clip)
        vloss = 0.5 * torch.max((v - returns) ** 2, (v_clipped - returns) ** 2).mean()
        return pg + 0.5 * vloss - 0.01 * dist.entropy().mean()

def get_inputs():
    T, N = 16, 8
    return [torch.randn(T, N, 16), torch.randint(0, 6, (T, N)), -torch.rand(T, N), torch.randn(T, N), torch.randn(T, N), (torch.rand(T, N) < 0.1).float()]

def get_init_inputs():
    return [16, 6, 64, 0.99, 0.95, 0.2]
