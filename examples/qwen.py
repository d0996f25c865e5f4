"""A small Qwen2-style decoder: Llama's shape plus a bias on the q/k/v
projections, tied input and output embeddings, a larger RoPE base, and the kv
heads repeated with repeat_interleave before attention. Trained on the bytes
of standard-library source, then generating with a KV cache.

    python examples/qwen.py --steps 200 --device tpu
"""
from decoder import DecoderConfig, main


def config(**overrides):
    return DecoderConfig(**{"qkv_bias": True, "tie_embeddings": True, "gqa": "repeat",
                            "rope_theta": 1000000.0, "norm_eps": 1e-6, **overrides})


if __name__ == "__main__":
    main("Qwen2", config())
