"""A decoder-only transformer in plain PyTorch, the shape shared by Llama and
Qwen2: RMSNorm, rotary position embeddings, a SwiGLU MLP and grouped-query
attention, with a static key/value cache for generation. Qwen differs by the
bias on the q/k/v projections (and, in its small sizes, tied embeddings).
Used by llama.py and qwen.py."""
import functools
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import common


@dataclass
class DecoderConfig:
    vocab_size: int = 256  # bytes of UTF-8 text
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 344  # SwiGLU width, about 8/3 * dim
    max_seq_len: int = 128
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    qkv_bias: bool = False  # Qwen2: True
    tie_embeddings: bool = False
    # "sdpa": scaled_dot_product_attention(enable_gqa=True) shares each kv
    # head among its query heads; "repeat": repeat_interleave the kv heads
    # first, as Hugging Face's repeat_kv does.
    gqa: str = "sdpa"
    batch_size: int = 16
    seq_len: int = 64  # training window
    lr: float = 1e-3
    weight_decay: float = 0.1


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class KVCache:
    """Keys and values of every layer in buffers of the full length, written
    at the token positions with index_copy_: shapes never change while
    generating, so each decode step reuses the same compiled programs."""

    def __init__(self, cfg, batch, dev, dtype):
        shape = (batch, cfg.n_kv_heads, cfg.max_seq_len, cfg.dim // cfg.n_heads)
        self.layers = [(torch.zeros(shape, device=dev, dtype=dtype),
                        torch.zeros(shape, device=dev, dtype=dtype)) for _ in range(cfg.n_layers)]
        self.key_positions = torch.arange(cfg.max_seq_len, device=dev)

    def update(self, layer, k, v, positions):
        k_all, v_all = self.layers[layer]
        k_all.index_copy_(2, positions, k)
        v_all.index_copy_(2, positions, v)
        return k_all, v_all

    def mask(self, positions):
        """(queries, max_seq_len): a query sees the keys at or before it."""
        return self.key_positions[None, :] <= positions[:, None]


class Attention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.layer = layer
        self.n_heads, self.n_kv_heads = cfg.n_heads, cfg.n_kv_heads
        self.head_dim = cfg.dim // cfg.n_heads
        self.gqa = cfg.gqa
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * self.head_dim, bias=cfg.qkv_bias)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.wo = nn.Linear(cfg.n_heads * self.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, positions, cache):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is None:
            mask, causal = None, True
        else:
            k, v = cache.update(self.layer, k, v, positions)
            mask, causal = cache.mask(positions), False
        if self.gqa == "repeat":
            repeats = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(repeats, dim=1), v.repeat_interleave(repeats, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                           enable_gqa=self.gqa == "sdpa")
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class SwiGLU(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.up = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.down = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Layer(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attn = Attention(cfg, layer)
        self.mlp_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, cos, sin, positions, cache):
        x = x + self.attn(self.attn_norm(x), cos, sin, positions, cache)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Layer(cfg, i) for i in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:  # one Parameter in both modules
            self.lm_head.weight = self.embed.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        # cos/sin of every position, half the head's dimensions each repeated
        # twice to match rotate_half's split.
        head_dim = cfg.dim // cfg.n_heads
        inv_freq = cfg.rope_theta ** -(torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(cfg.max_seq_len).float(), inv_freq).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens, positions=None, cache=None):
        """Logits (batch, T, vocab). Without a cache, tokens sit at positions
        0..T-1 under a causal mask; with one, at `positions` (T,) and they
        attend to everything cached before them."""
        if positions is None:
            positions = torch.arange(tokens.size(1), device=tokens.device)
        cos, sin = self.cos[positions], self.sin[positions]
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, positions, cache)
        x = self.norm(x)
        return self.lm_head(x)

    @torch.no_grad()
    def generate(self, prompt, new_tokens, temperature=0.0, top_k=None):
        """Continues prompt (batch, T) by new_tokens tokens using the KV
        cache: one pass over the prompt, then one token per step."""
        B, T = prompt.shape
        if T + new_tokens > self.cfg.max_seq_len:
            raise ValueError(f"prompt {T} + {new_tokens} new tokens exceeds max_seq_len "
                             f"{self.cfg.max_seq_len}")
        cache = KVCache(self.cfg, B, prompt.device, self.embed.weight.dtype)
        positions = torch.arange(T, device=prompt.device)
        logits = self(prompt, positions, cache)[:, -1]
        out = []
        for _ in range(new_tokens):
            token = common.sample_next(logits, temperature, top_k)
            out.append(token)
            positions = positions[-1:] + 1
            logits = self(token[:, None], positions, cache)[:, -1]
        return torch.stack(out, 1)


@functools.lru_cache(maxsize=1)
def corpus():
    """The training text as a tensor of its UTF-8 bytes."""
    return torch.tensor(list(common.stdlib_text().encode("utf-8")), dtype=torch.long)


def decode(tokens):
    return bytes(tokens.tolist()).decode("utf-8", errors="replace")


def build(cfg, seed=0):
    torch.manual_seed(seed)
    return Decoder(cfg)


def make_optimizer(model, cfg):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": other, "weight_decay": 0.0}],
                             lr=cfg.lr, betas=(0.9, 0.95))


def make_batches(cfg, steps, seed=0):
    return common.batches(lambda g: common.random_windows(corpus(), cfg.seq_len, cfg.batch_size, g),
                          steps, seed)


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def main(name, cfg):
    """The whole llama.py / qwen.py script: train, then generate."""
    p = common.parser(f"Trains a small {name}-style decoder on standard-library source, "
                      "then generates with a KV cache.")
    p.add_argument("--new-tokens", type=int, default=48)
    args = p.parse_args()
    print(f"a {name}-style decoder")
    model, dev = common.build_and_train(sys.modules[__name__], cfg, args)

    model.eval()
    prompt = corpus()[:cfg.max_seq_len - args.new_tokens][None]
    start = time.perf_counter()
    out = model.generate(prompt.to(dev), args.new_tokens, temperature=0.8, top_k=20).cpu()
    rate = args.new_tokens / (time.perf_counter() - start)
    print(f"--- generated ({rate:.1f} tokens/s with the KV cache) ---")
    print(decode(prompt[0]) + "|" + decode(out[0]))
    common.report(args)
