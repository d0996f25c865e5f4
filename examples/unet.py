"""A small UNet denoiser: convolution blocks with GroupNorm and SiLU, stride-2
convolutions down, and back up through both common ways (a transposed
convolution at odd levels, bilinear interpolation plus a convolution at even
ones), with skip connections. It learns to predict the noise added to
generated images of soft coloured blobs (the noise level is an extra input
channel), with an MSE loss and Adam.

    python examples/unet.py --steps 100 --device tpu
"""
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import common


@dataclass
class Config:
    widths: tuple = (32, 64, 128)
    groups: int = 8
    image_size: int = 32
    blobs: int = 4
    batch_size: int = 16
    lr: float = 2e-3


class ConvBlock(nn.Sequential):
    def __init__(self, cin, cout, groups):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(groups, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(groups, cout), nn.SiLU())


class Up(nn.Module):
    def __init__(self, cin, cout, transposed):
        super().__init__()
        self.transposed = transposed
        self.conv = (nn.ConvTranspose2d(cin, cout, 2, stride=2) if transposed
                     else nn.Conv2d(cin, cout, 3, padding=1))

    def forward(self, x):
        if not self.transposed:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w, g = cfg.widths, cfg.groups
        self.inc = ConvBlock(4, w[0], g)  # RGB + noise level
        self.down = nn.ModuleList(nn.Conv2d(a, a, 3, stride=2, padding=1) for a in w[:-1])
        self.enc = nn.ModuleList(ConvBlock(a, b, g) for a, b in zip(w, w[1:]))
        self.up = nn.ModuleList(Up(b, a, transposed=i % 2 == 1)
                                for i, (a, b) in enumerate(zip(w, w[1:])))
        self.dec = nn.ModuleList(ConvBlock(2 * a, a, g) for a in w[:-1])
        self.out = nn.Conv2d(w[0], 3, 1)

    def forward(self, noisy, sigma):
        level = sigma[:, None, None, None].expand(-1, 1, *noisy.shape[2:])
        x = self.inc(torch.cat([noisy, level], 1))
        skips = []
        for down, enc in zip(self.down, self.enc):
            skips.append(x)
            x = enc(down(x))
        for up, dec in reversed(list(zip(self.up, self.dec))):
            x = dec(torch.cat([skips.pop(), up(x)], 1))
        return self.out(x)


def make_images(cfg, n, generator):
    """n images in [-1, 1] of `blobs` soft Gaussian discs of random place,
    size and colour over a dark background."""
    grid = torch.linspace(-1, 1, cfg.image_size)
    yy, xx = torch.meshgrid(grid, grid, indexing="ij")
    centre = torch.rand(n, cfg.blobs, 2, 1, 1, generator=generator) * 2 - 1
    radius = 0.1 + 0.3 * torch.rand(n, cfg.blobs, 1, 1, generator=generator)
    colour = torch.rand(n, cfg.blobs, 3, 1, 1, generator=generator)
    dist2 = (xx - centre[:, :, 0]) ** 2 + (yy - centre[:, :, 1]) ** 2
    alpha = torch.exp(-dist2 / (2 * radius ** 2))  # (n, blobs, H, W)
    return (alpha[:, :, None] * colour).sum(1).clamp(0, 1) * 2 - 1


def noisy_batch(cfg, generator):
    clean = make_images(cfg, cfg.batch_size, generator)
    sigma = 0.1 + 0.9 * torch.rand(cfg.batch_size, generator=generator)
    noise = torch.randn(clean.shape, generator=generator)
    return clean + sigma[:, None, None, None] * noise, sigma, noise


def build(cfg, seed=0):
    torch.manual_seed(seed)
    return UNet(cfg)


def make_optimizer(model, cfg):
    return torch.optim.Adam(model.parameters(), lr=cfg.lr)


def make_batches(cfg, steps, seed=0):
    return common.batches(lambda g: noisy_batch(cfg, g), steps, seed)


def loss_fn(model, batch):
    noisy, sigma, noise = batch
    return F.mse_loss(model(noisy, sigma), noise)


def main():
    args = common.parser(__doc__).parse_args()
    cfg = Config()
    model, dev = common.build_and_train(sys.modules[__name__], cfg, args)

    model.eval()
    noisy, sigma, noise = common.to_device(noisy_batch(cfg, torch.Generator().manual_seed(1)), dev)
    with torch.no_grad():
        predicted = model(noisy, sigma)
    residual = (F.mse_loss(predicted, noise) / noise.pow(2).mean()).item()
    print(f"held-out batch: noise predicted with {residual:.3f} of its energy left")
    common.report(args)


if __name__ == "__main__":
    main()
