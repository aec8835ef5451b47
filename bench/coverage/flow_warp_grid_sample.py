import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """Optical-flow backward warping (PWC-Net / RAFT / video SR): base grid from torch.meshgrid + flow, normalised to [-1, 1] with align_corners=True convention, F.grid_sample(bilinear, padding_mode='border', align_corners=True), occlusion mask from warping ones with padding 'zeros' and nearest mode, photometric Charbonnier loss with the mask."""
    def __init__(self, c=3, hid=16):
        super().__init__()
        self.flow_net = nn.Sequential(nn.Conv2d(2 * c, hid, 3, padding=1), nn.LeakyReLU(0.1), nn.Conv2d(hid, 2, 3, padding=1))

    def warp(self, img, flow, mode="bilinear", padding_mode="border"):
        B, _, H, W = img.shape
        yy, xx = torch.meshgrid(torch.arange(H, device=img.device), torch.arange(W, device=img.device), indexing="ij")
        grid = torch.stack((xx, yy), 0).float().unsqueeze(0).repeat(B, 1, 1, 1)
        vgrid = grid + flow
        vx = 2.0 * vgrid[:, 0] / max(W - 1, 1) - 1.0
        vy = 2.0 * vgrid[:, 1] / max(H - 1, 1) - 1.0
        vgrid = torch.stack((vx, vy), dim=3)
        return F.grid_sample(img, vgrid, mode=mode, padding_mode=padding_mode, align_corners=True)

    def forward(self, im1, im2):
        flow = self.flow_net(torch.cat([im1, im2], 1))
        warped = self.warp(im2, flow)
        mask = self.warp(torch.ones_like(im2[:, :1]), flow, mode="nearest", padding_mode="zeros")
        mask = (mask > 0.999).float()
        diff = (im1 - warped) * mask
        return torch.sqrt(diff ** 2 + 1e-6).sum() / (mask.sum() * 3 + 1e-6), flow

def get_inputs():
    return [torch.randn(2, 3, 32, 48), torch.randn(2, 3, 32, 48)]

def get_init_inputs():
    return [3, 16]
