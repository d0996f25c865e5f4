"""A character-level GPT in the style of minGPT: token and position
embeddings, causal self-attention blocks with LayerNorm and a GELU MLP, AdamW.
It trains on the source of a few standard-library modules, then samples a
continuation of the text's opening.

    python examples/mingpt.py --steps 200 --device tpu
"""
import functools
import math
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import common


@dataclass
class Config:
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.1
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.1
    # "math": the product, mask and softmax spelled out, as minGPT writes
    # them; "sdpa": F.scaled_dot_product_attention, as GPT-2 ports do.
    attention: str = "math"


class CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, tokens):
        return "".join(self.chars[i] for i in tokens.tolist())


@functools.lru_cache(maxsize=1)
def corpus():
    """(tokenizer, every character of the text as a token tensor)."""
    text = common.stdlib_text()
    tokenizer = CharTokenizer(text)
    return tokenizer, tokenizer.encode(text)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.attention = cfg.attention
        self.dropout = cfg.dropout
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        causal = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
            return self.resid_drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
            nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg, vocab_size):
        super().__init__()
        self.block_size = cfg.block_size
        self.wte = nn.Embedding(vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.Sequential(*[Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, vocab_size, bias=False)
        # GPT-2's initialisation; residual projections scaled by depth.
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))
            elif p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        return self.head(self.ln_f(self.blocks(x)))

    @torch.no_grad()
    def generate(self, idx, new_tokens, temperature=0.0, top_k=None):
        """new_tokens tokens continuing idx (batch, >= block_size), each
        predicted from a sliding window of the last block_size tokens: one
        input shape, so the device compiles the forward pass once."""
        window, out = idx[:, -self.block_size:], []
        for _ in range(new_tokens):
            token = common.sample_next(self(window)[:, -1], temperature, top_k)
            out.append(token)
            window = torch.cat([window[:, 1:], token[:, None]], 1)
        return torch.stack(out, 1)


def build(cfg, seed=0):
    torch.manual_seed(seed)
    return GPT(cfg, len(corpus()[0]))


def make_optimizer(model, cfg):
    """AdamW with weight decay on the matrices only (linear and embedding
    weights), not on biases or LayerNorm parameters, as nanoGPT splits them."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95))


def make_batches(cfg, steps, seed=0):
    data = corpus()[1]
    return common.batches(lambda g: common.random_windows(data, cfg.block_size, cfg.batch_size, g),
                          steps, seed)


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def main():
    p = common.parser(__doc__)
    p.add_argument("--sample", type=int, default=200, help="characters to sample after training")
    args = p.parse_args()
    cfg = Config()
    model, dev = common.build_and_train(sys.modules[__name__], cfg, args)

    tokenizer, data = corpus()
    prompt = data[:cfg.block_size][None]
    model.eval()
    start = time.perf_counter()
    out = model.generate(prompt.to(dev), args.sample, temperature=0.8, top_k=20).cpu()
    print(f"--- sample ({args.sample / (time.perf_counter() - start):.1f} tokens/s) ---")
    print(tokenizer.decode(prompt[0]) + "|" + tokenizer.decode(out[0]))
    common.report(args)


if __name__ == "__main__":
    main()
