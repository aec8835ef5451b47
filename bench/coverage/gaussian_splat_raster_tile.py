import torch
import torch.nn as nn
import torch.nn.functional as F


def quat_to_rotmat(q):
    q = F.normalize(q, dim=-1)
    w, x, y, z = q.unbind(-1)
    R = torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1)
    return R.view(*q.shape[:-1], 3, 3)


class Model(nn.Module):
    """3D Gaussian splatting forward in plain PyTorch (gsplat's torch reference path, one small image): quaternion to
    rotation (unbind / stack / view), covariance R S S^T R^T with diag_embed, world-to-camera transform, perspective
    Jacobian, 2D covariance J W Sigma W^T J^T + 0.3 I, conic by explicit 2x2 inverse, pixel grid from meshgrid,
    Gaussian weights exp(-0.5 d^T conic d), opacity sigmoid, depth sort (argsort + index_select), front-to-back
    alpha compositing with an exclusive cumprod of (1 - alpha)."""
    def __init__(self, n=512, H=32, W=32, fx=40.0, fy=40.0):
        super().__init__()
        self.H, self.W, self.fx, self.fy = H, W, fx, fy
        ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32) + 0.5, torch.arange(W, dtype=torch.float32) + 0.5, indexing="ij")
        self.register_buffer("pix", torch.stack([xs, ys], -1).view(-1, 2))          # P 2
        self.register_buffer("viewmat", torch.eye(4))
        self.viewmat[2, 3] = 4.0

    def forward(self, means, quats, log_scales, opacity_logits, colors):
        R = quat_to_rotmat(quats)                                               # N 3 3
        S = torch.diag_embed(torch.exp(log_scales))
        M = R @ S
        cov3d = M @ M.transpose(-1, -2)
        Rw, tw = self.viewmat[:3, :3], self.viewmat[:3, 3]
        p_cam = means @ Rw.T + tw                                               # N 3
        tx, ty, tz = p_cam.unbind(-1)
        tz = tz.clamp(min=0.2)
        zeros = torch.zeros_like(tz)
        J = torch.stack([self.fx / tz, zeros, -self.fx * tx / tz ** 2,
                         zeros, self.fy / tz, -self.fy * ty / tz ** 2], -1).view(-1, 2, 3)
        cov_cam = Rw @ cov3d @ Rw.T
        cov2d = J @ cov_cam @ J.transpose(1, 2) + 0.3 * torch.eye(2, device=means.device)
        a, b, c = cov2d[:, 0, 0], cov2d[:, 0, 1], cov2d[:, 1, 1]
        det = (a * c - b * b).clamp(min=1e-8)
        conic = torch.stack([c / det, -b / det, a / det], -1)                   # N 3
        mean2d = torch.stack([self.fx * tx / tz + self.W / 2, self.fy * ty / tz + self.H / 2], -1)
        order = torch.argsort(tz)
        conic, mean2d = conic.index_select(0, order), mean2d.index_select(0, order)
        opac = torch.sigmoid(opacity_logits).index_select(0, order)
        col = colors.index_select(0, order)
        d = self.pix[:, None, :] - mean2d[None]                                 # P N 2
        power = -0.5 * (conic[:, 0] * d[..., 0] ** 2 + conic[:, 2] * d[..., 1] ** 2) - conic[:, 1] * d[..., 0] * d[..., 1]
        alpha = (opac[None] * torch.exp(power.clamp(max=0.0))).clamp(max=0.99)  # P N
        T = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], dim=1), dim=1)
        w = alpha * T
        img = w @ col                                                           # P 3
        return img.view(self.H, self.W, 3).permute(2, 0, 1), w.sum(-1).view(self.H, self.W)


def get_inputs():
    n = 512
    return [torch.randn(n, 3), torch.randn(n, 4), torch.randn(n, 3) * 0.3 - 2.0, torch.randn(n), torch.rand(n, 3)]


def get_init_inputs():
    return [512, 32, 32, 40.0, 40.0]
