import torch
import torch.nn as nn

class ODEFunc(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d + 1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, d))
    def forward(self, t, y):
        tt = torch.ones_like(y[:, :1]) * t
        return self.net(torch.cat([tt, y], dim=1))

class Model(nn.Module):
    """Neural ODE with a fixed-step RK4 integrator in forward (Python loop over steps, time concatenated as an input feature), latent trajectory stacked at every step, classifier on the final state."""
    def __init__(self, d=16, steps=8, t1=1.0, ncls=4):
        super().__init__()
        self.f = ODEFunc(d)
        self.steps, self.t1 = steps, t1
        self.head = nn.Linear(d, ncls)

    def forward(self, y0):
        h = self.t1 / self.steps
        y, t = y0, 0.0
        traj = [y]
        for _ in range(self.steps):
            k1 = self.f(t, y)
            k2 = self.f(t + h / 2, y + h / 2 * k1)
            k3 = self.f(t + h / 2, y + h / 2 * k2)
            k4 = self.f(t + h, y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
            traj.append(y)
        return self.head(y), torch.stack(traj, dim=1)

def get_inputs():
    return [torch.randn(32, 16)]

def get_init_inputs():
    return [16, 8, 1.0, 4]
