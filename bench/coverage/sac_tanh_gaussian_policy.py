import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal

LOG_STD_MIN, LOG_STD_MAX = -5, 2


class Model(nn.Module):
    """SAC actor + twin critics loss (CleanRL sac_continuous_action): policy MLP to mean and log_std, log_std squashed
    with tanh into [min, max], reparameterised sample x_t = mean + std * eps (eps passed in), tanh squash with
    action_scale/bias buffers, Normal(mean, std).log_prob(x_t) minus log(scale * (1 - y^2) + 1e-6) summed, twin Q
    networks on cat(obs, action), min over the two, actor loss (alpha * log_pi - min_q).mean()."""
    def __init__(self, obs=32, act=6, hidden=256, alpha=0.2):
        super().__init__()
        self.alpha = alpha
        self.fc1, self.fc2 = nn.Linear(obs, hidden), nn.Linear(hidden, hidden)
        self.fc_mean, self.fc_logstd = nn.Linear(hidden, act), nn.Linear(hidden, act)
        self.register_buffer("action_scale", torch.full((act,), 2.0))
        self.register_buffer("action_bias", torch.zeros(act))
        self.q1 = nn.Sequential(nn.Linear(obs + act, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.q2 = nn.Sequential(nn.Linear(obs + act, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs, eps):
        h = F.relu(self.fc2(F.relu(self.fc1(obs))))
        mean = self.fc_mean(h)
        log_std = torch.tanh(self.fc_logstd(h))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = mean + std * eps
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        log_prob = log_prob.sum(1, keepdim=True)
        sa = torch.cat([obs, action], 1)
        min_q = torch.min(self.q1(sa), self.q2(sa))
        return ((self.alpha * log_prob) - min_q).mean(), action


def get_inputs():
    return [torch.randn(512, 32), torch.randn(512, 6)]


def get_init_inputs():
    return [32, 6, 256, 0.2]
