"""A small Llama-style decoder (RMSNorm, RoPE, SwiGLU, grouped-query
attention through scaled_dot_product_attention(enable_gqa=True)) trained on
the bytes of standard-library source, then generating with a KV cache.

    python examples/llama.py --steps 200 --device tpu
"""
from decoder import DecoderConfig, main


def config(**overrides):
    """Llama's choices: no projection biases, untied embeddings, and the
    kv heads shared inside scaled_dot_product_attention."""
    return DecoderConfig(**{"qkv_bias": False, "tie_embeddings": False, "gqa": "sdpa",
                            "rope_theta": 10000.0, "norm_eps": 1e-5, **overrides})


if __name__ == "__main__":
    main("Llama", config())
