"""A ResNet-18-style classifier (BasicBlocks with BatchNorm and ReLU, max-pool
stem, stride-2 convolutions to downsample, adaptive average pooling) trained
with SGD, momentum and weight decay on generated images: each class is a
striped pattern of its own orientation, frequency and colour, with random
phase and noise.

    python examples/resnet.py --steps 100 --device tpu
"""
import math
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import common


@dataclass
class Config:
    widths: tuple = (32, 64, 128, 256)
    blocks: tuple = (2, 2, 2, 2)  # ResNet-18
    classes: int = 10
    image_size: int = 32
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    noise: float = 0.5


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w = cfg.widths
        self.stem = nn.Sequential(nn.Conv2d(3, w[0], 3, 1, 1, bias=False), nn.BatchNorm2d(w[0]),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], w[0]
        for i, (cout, n) in enumerate(zip(w, cfg.blocks)):
            for j in range(n):
                stages.append(BasicBlock(cin, cout, 2 if i > 0 and j == 0 else 1))
                cin = cout
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, cfg.classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        return self.fc(self.pool(self.stages(self.stem(x))).flatten(1))


def make_images(cfg, n, generator):
    """n (image, label) pairs: class c is a grating at angle pi*c/classes,
    with 2 + c%3 periods across the image and a colour of its own; phase and
    noise are random."""
    labels = torch.randint(cfg.classes, (n,), generator=generator)
    c = labels.float()[:, None, None]
    grid = torch.linspace(-1, 1, cfg.image_size)
    yy, xx = torch.meshgrid(grid, grid, indexing="ij")
    angle = math.pi * c / cfg.classes
    freq = 2 + (labels % 3).float()[:, None, None]
    phase = 2 * math.pi * torch.rand(n, 1, 1, generator=generator)
    wave = torch.sin(math.pi * freq * (xx * torch.cos(angle) + yy * torch.sin(angle)) + phase)
    hue = 2 * math.pi * c[..., None] / cfg.classes + torch.tensor([0, 2.1, 4.2])[:, None, None]
    images = wave[:, None] * torch.cos(hue)
    images = images + cfg.noise * torch.randn(images.shape, generator=generator)
    return images, labels


def build(cfg, seed=0):
    torch.manual_seed(seed)
    return ResNet(cfg)


def make_optimizer(model, cfg):
    return torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                           weight_decay=cfg.weight_decay)


def make_batches(cfg, steps, seed=0):
    return common.batches(lambda g: make_images(cfg, cfg.batch_size, g), steps, seed)


def loss_fn(model, batch):
    images, labels = batch
    return F.cross_entropy(model(images), labels)


def main():
    args = common.parser(__doc__).parse_args()
    cfg = Config()
    model, dev = common.build_and_train(sys.modules[__name__], cfg, args)

    model.eval()  # BatchNorm now uses its running statistics
    images, labels = make_images(cfg, 256, torch.Generator().manual_seed(args.seed + 1))
    with torch.no_grad():
        predicted = model(images.to(dev)).argmax(1).cpu()
    print(f"accuracy on 256 new images: {(predicted == labels).float().mean().item():.3f}")
    common.report(args)


if __name__ == "__main__":
    main()
