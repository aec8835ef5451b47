import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def ms_deform_attn_core_pytorch(value, value_spatial_shapes, sampling_locations, attention_weights):
    N_, S_, M_, D_ = value.shape
    _, Lq_, M_, L_, P_, _ = sampling_locations.shape
    value_list = value.split([H_ * W_ for H_, W_ in value_spatial_shapes], dim=1)
    sampling_grids = 2 * sampling_locations - 1
    sampling_value_list = []
    for lid_, (H_, W_) in enumerate(value_spatial_shapes):
        value_l_ = value_list[lid_].flatten(2).transpose(1, 2).reshape(N_ * M_, D_, H_, W_)
        sampling_grid_l_ = sampling_grids[:, :, :, lid_].transpose(1, 2).flatten(0, 1)
        sampling_value_l_ = F.grid_sample(value_l_, sampling_grid_l_, mode="bilinear", padding_mode="zeros", align_corners=False)
        sampling_value_list.append(sampling_value_l_)
    attention_weights = attention_weights.transpose(1, 2).reshape(N_ * M_, 1, Lq_, L_ * P_)
    output = (torch.stack(sampling_value_list, dim=-2).flatten(-2) * attention_weights).sum(-1).view(N_, M_ * D_, Lq_)
    return output.transpose(1, 2).contiguous()


class Model(nn.Module):
    """Deformable-DETR encoder layer in pure PyTorch: DETR sine position embedding (cumsum of a not-mask,
    dim_t = temperature ** (2 * (i // 2) / d), stack(sin, cos).flatten), level embeddings, reference points
    from meshgrid/linspace normalised by the shapes, sampling offsets and softmaxed attention weights from
    Linear layers, multi-scale sampling by F.grid_sample per level (padding zeros, align_corners=False), FFN."""
    def __init__(self, d=256, heads=8, levels=2, points=4, shapes=((32, 32), (16, 16))):
        super().__init__()
        self.d, self.M, self.L, self.P, self.shapes = d, heads, levels, points, shapes
        self.level_embed = nn.Parameter(torch.randn(levels, d) * 0.02)
        self.sampling_offsets = nn.Linear(d, heads * levels * points * 2)
        self.attention_weights = nn.Linear(d, heads * levels * points)
        self.value_proj = nn.Linear(d, d)
        self.output_proj = nn.Linear(d, d)
        self.norm1 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
        self.norm2 = nn.LayerNorm(d)

    def sine_pos(self, B, H, W, device):
        npf, temperature, scale = self.d // 2, 10000, 2 * math.pi
        not_mask = torch.ones(B, H, W, device=device)
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        y_embed = (y_embed - 0.5) / (y_embed[:, -1:, :] + 1e-6) * scale
        x_embed = (x_embed - 0.5) / (x_embed[:, :, -1:] + 1e-6) * scale
        dim_t = torch.arange(npf, dtype=torch.float32, device=device)
        dim_t = temperature ** (2 * (dim_t // 2) / npf)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).flatten(1, 2)

    def reference_points(self, device):
        refs = []
        for H_, W_ in self.shapes:
            ref_y, ref_x = torch.meshgrid(torch.linspace(0.5, H_ - 0.5, H_, dtype=torch.float32, device=device),
                                          torch.linspace(0.5, W_ - 0.5, W_, dtype=torch.float32, device=device), indexing="ij")
            refs.append(torch.stack((ref_x.reshape(-1) / W_, ref_y.reshape(-1) / H_), -1))
        return torch.cat(refs, 0)[None, :, None].expand(-1, -1, self.L, -1)

    def forward(self, feat0, feat1):
        B = feat0.shape[0]
        srcs, poss = [], []
        for lvl, f in enumerate((feat0, feat1)):
            _, _, H, W = f.shape
            srcs.append(f.flatten(2).transpose(1, 2))
            poss.append(self.sine_pos(B, H, W, f.device) + self.level_embed[lvl].view(1, 1, -1))
        src, pos = torch.cat(srcs, 1), torch.cat(poss, 1)
        q = src + pos
        Nq = q.shape[1]
        value = self.value_proj(src).view(B, Nq, self.M, self.d // self.M)
        off = self.sampling_offsets(q).view(B, Nq, self.M, self.L, self.P, 2)
        aw = F.softmax(self.attention_weights(q).view(B, Nq, self.M, self.L * self.P), -1).view(B, Nq, self.M, self.L, self.P)
        normalizer = torch.tensor([[w, h] for h, w in self.shapes], dtype=torch.float32, device=q.device)
        loc = self.reference_points(q.device)[:, :, None, :, None, :] + off / normalizer[None, None, None, :, None, :]
        out = self.output_proj(ms_deform_attn_core_pytorch(value, self.shapes, loc, aw))
        src = self.norm1(src + out)
        return self.norm2(src + self.ffn(src))


def get_inputs():
    return [torch.randn(4, 256, 32, 32), torch.randn(4, 256, 16, 16)]


def get_init_inputs():
    return [256, 8, 2, 4, ((32, 32), (16, 16))]
