"""A DLRM-style click-through model: EmbeddingBag tables (sum and mean
pooling) for the sparse features, a bottom MLP for the dense ones, pairwise
dot-product interactions between all of them, a top MLP and a
binary-cross-entropy loss. Trained with Adagrad on synthetic click logs whose
clicks follow hidden pairwise interactions, so there is something to learn.

    python examples/dlrm.py --steps 200 --device tpu
"""
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import common


@dataclass
class Config:
    dense_features: int = 13
    table_sizes: tuple = (100, 50, 200, 30, 10, 150)
    embedding_dim: int = 16
    bottom: tuple = (64, 32)
    top: tuple = (64, 32)
    mean_tables: tuple = (1, 3)  # pooled by mean; the others by sum
    bag_size: int = 3  # ids per example and table, on average
    batch_size: int = 128
    lr: float = 0.1


def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg.embedding_dim
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(n, d, mode="mean" if i in cfg.mean_tables else "sum")
            for i, n in enumerate(cfg.table_sizes))
        self.bottom = mlp((cfg.dense_features, *cfg.bottom, d), last_relu=True)
        features = len(cfg.table_sizes) + 1
        rows, cols = torch.tril_indices(features, features, offset=-1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        self.top = mlp((d + len(rows), *cfg.top, 1), last_relu=False)
        for table in self.tables:  # DLRM's initialisation: small, by table size
            bound = table.num_embeddings ** -0.5
            nn.init.uniform_(table.weight, -bound, bound)

    def forward(self, dense, *sparse):
        """dense (batch, dense_features); sparse: per table, its ids (all
        bags concatenated) then each bag's start offset (batch,)."""
        x = self.bottom(dense)
        pooled = [table(ids, offsets)
                  for table, ids, offsets in zip(self.tables, sparse[0::2], sparse[1::2])]
        t = torch.stack([x, *pooled], dim=1)  # (batch, features, d)
        dots = torch.bmm(t, t.transpose(1, 2))[:, self.rows, self.cols]
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


class ClickLog:
    """Synthetic impressions clicked the way DLRM assumes: every id has a
    hidden vector, and the click logit is the sum of dot products between the
    tables' pooled hidden vectors, plus a linear term in the dense features
    (log(1 + x) of log-normal x, as DLRM transforms its counts). Ids are
    skewed: small ids are popular. Every table gets
    bag_size * batch ids per batch, split into bags of random lengths (some
    empty), so shapes stay fixed while bags vary."""

    def __init__(self, cfg, generator, rank=4):
        self.cfg, self.generator = cfg, generator
        self.w = torch.randn(cfg.dense_features, generator=generator) / cfg.dense_features ** 0.5
        self.hidden = [torch.randn(n, rank, generator=generator) / rank ** 0.5 for n in cfg.table_sizes]

    def batch(self):
        cfg, g = self.cfg, self.generator
        B, total = cfg.batch_size, cfg.batch_size * cfg.bag_size
        dense = torch.randn(B, cfg.dense_features, generator=g).exp().log1p()
        sparse, pooled = [], []
        for n, hidden in zip(cfg.table_sizes, self.hidden):
            ids = (n * torch.rand(total, generator=g) ** 3).long()
            cuts = torch.randint(total + 1, (B - 1,), generator=g).sort().values
            bag = torch.bucketize(torch.arange(total), cuts, right=True)
            pooled.append(torch.zeros(B, hidden.size(1)).index_add_(0, bag, hidden[ids]))
            sparse += [ids, torch.cat([torch.zeros(1, dtype=torch.long), cuts])]
        h = torch.stack(pooled, 1)
        pairs = (h.sum(1).pow(2).sum(1) - h.pow(2).sum((1, 2))) / 2  # sum over i<j of <h_i, h_j>
        logit = (dense - dense.mean(0)) @ self.w + pairs / cfg.bag_size
        clicked = torch.bernoulli(torch.sigmoid(logit), generator=g)
        return dense, clicked, *sparse


def build(cfg, seed=0):
    torch.manual_seed(seed)
    return DLRM(cfg)


def make_optimizer(model, cfg):
    return torch.optim.Adagrad(model.parameters(), lr=cfg.lr)


def make_batches(cfg, steps, seed=0):
    log = ClickLog(cfg, torch.Generator().manual_seed(seed))
    return [log.batch() for _ in range(steps)]


def loss_fn(model, batch):
    dense, clicked, *sparse = batch
    return F.binary_cross_entropy_with_logits(model(dense, *sparse), clicked)


def main():
    args = common.parser(__doc__).parse_args()
    common.build_and_train(sys.modules[__name__], Config(), args)
    common.report(args)


if __name__ == "__main__":
    main()
