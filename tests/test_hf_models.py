"""Hugging Face transformers models on tpu against the same model on PyTorch's
CPU backend: small configurations built from random weights (nothing is
downloaded), dropout off. Training: the loss and every parameter's gradient
after one backward, in the mode the suite runs in (strict, or fused under
TORCH_TPU_EAGER_MODE=fused), and for a few through torch.compile(backend=
"tpu"). Serving: greedy generate() with a KV cache gives the CPU's tokens.

Tolerances: loss rtol 1e-5; a gradient within 1e-4 of its largest CPU entry
plus 1e-6 (some are mathematically zero, like a key bias's, and come out as
rounding noise on both sides). No parameter may fall back to the CPU."""
import copy
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the models are built here; never fetch
import transformers as T  # noqa: E402

from torch_tpu import metrics  # noqa: E402

COMMON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              vocab_size=101, max_position_embeddings=64)
DECODER = dict(COMMON, num_key_value_heads=2)
MOE = dict(DECODER, num_experts_per_tok=2)


def tokens(batch=2, length=12, low=0):
    return torch.randint(low, 101, (batch, length))


def causal_lm():
    ids = tokens()
    return dict(input_ids=ids, labels=ids.clone(), attention_mask=torch.ones_like(ids))


def seq2seq():
    return dict(input_ids=tokens(length=10, low=3), labels=tokens(length=7, low=3))


def images():
    return dict(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([1, 3]))


MODELS = {
    # FNet mixes tokens with a 2-d Fourier transform (torch.fft.fft twice, the real part)
    "fnet": (lambda: T.FNetForMaskedLM(T.FNetConfig(**COMMON, use_tpu_fourier_optimizations=False)),
             lambda: dict(input_ids=tokens(), labels=tokens())),
    "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=101,
                                                    n_positions=64)), causal_lm),
    "bert": (lambda: T.BertForMaskedLM(T.BertConfig(**COMMON)), causal_lm),
    "distilbert": (lambda: T.DistilBertForSequenceClassification(T.DistilBertConfig(
        dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=101, max_position_embeddings=64)),
        lambda: dict(input_ids=tokens(), labels=torch.tensor([0, 1]))),
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**DECODER)), causal_lm),
    "qwen2": (lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**DECODER)), causal_lm),
    "gemma": (lambda: T.GemmaForCausalLM(T.GemmaConfig(**DECODER, head_dim=8)), causal_lm),
    "mixtral": (lambda: T.MixtralForCausalLM(T.MixtralConfig(**MOE, num_local_experts=4)), causal_lm),
    "qwen3_moe": (lambda: T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(**MOE, num_experts=4,
                                                                 moe_intermediate_size=32)), causal_lm),
    "deepseek_v3": (lambda: T.DeepseekV3ForCausalLM(T.DeepseekV3Config(
        **dict(MOE, num_key_value_heads=4), n_routed_experts=4, moe_intermediate_size=32, n_shared_experts=1,
        first_k_dense_replace=1, n_group=1, topk_group=1, kv_lora_rank=16, q_lora_rank=16,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)), causal_lm),
    "gpt_oss": (lambda: T.GptOssForCausalLM(T.GptOssConfig(
        **MOE, num_local_experts=4, head_dim=8, layer_types=["sliding_attention", "full_attention"],
        sliding_window=8)), causal_lm),
    # ALiBi position biases (a cumulative sum of the mask, baddbmm)
    "bloom": (lambda: T.BloomForCausalLM(T.BloomConfig(hidden_size=32, n_layer=2, n_head=4, vocab_size=101)),
              causal_lm),
    # Disentangled attention: relative-position buckets gathered into the scores
    "deberta_v2": (lambda: T.DebertaV2ForMaskedLM(T.DebertaV2Config(**COMMON)), causal_lm),
    # Two-stream attention over permutations, written with einsum
    "xlnet": (lambda: T.XLNetLMHeadModel(T.XLNetConfig(d_model=32, n_layer=2, n_head=4, d_inner=64,
                                                       vocab_size=101)), causal_lm),
    # State-space and recurrent models in PyTorch ops (no custom kernels off CUDA): Mamba's
    # selective scan, RWKV's time mixing, RecurrentGemma's RG-LRU with local attention
    "mamba": (lambda: T.MambaForCausalLM(T.MambaConfig(hidden_size=32, num_hidden_layers=2, vocab_size=101,
                                                       state_size=8)), causal_lm),
    "rwkv": (lambda: T.RwkvForCausalLM(T.RwkvConfig(hidden_size=32, num_hidden_layers=2, vocab_size=101,
                                                    attention_hidden_size=32, intermediate_size=64,
                                                    context_length=64)), causal_lm),
    "recurrent_gemma": (lambda: T.RecurrentGemmaForCausalLM(T.RecurrentGemmaConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, intermediate_size=64,
        vocab_size=101, lru_width=32, attention_window_size=8, block_types=["recurrent", "attention"])),
        causal_lm),
    # Characters hashed into buckets, downsampled by a strided convolution and upsampled back
    "canine": (lambda: T.CanineForSequenceClassification(T.CanineConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_hash_buckets=64,
        downsampling_rate=2, num_labels=2)), lambda: dict(input_ids=tokens(), labels=torch.tensor([0, 1]))),
    "t5": (lambda: T.T5ForConditionalGeneration(T.T5Config(d_model=32, d_ff=64, num_layers=2, num_heads=4,
                                                            d_kv=8, vocab_size=101, decoder_start_token_id=0)),
           seq2seq),
    "bart": (lambda: T.BartForConditionalGeneration(T.BartConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=101, max_position_embeddings=64)), seq2seq),
    "whisper": (lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=101, num_mel_bins=16, max_source_positions=20,
        max_target_positions=32, pad_token_id=0, decoder_start_token_id=1)),
        lambda: dict(input_features=torch.randn(2, 16, 40), labels=tokens(length=6, low=2))),
    "wav2vec2": (lambda: T.Wav2Vec2ForSequenceClassification(T.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        num_labels=3, mask_time_prob=0.0)),  # SpecAugment draws its masks from numpy: off
        lambda: dict(input_values=torch.randn(2, 400), labels=torch.tensor([0, 2]))),
    # CTC over the frames (flattened targets, lengths from the label mask):
    # a repeated label, and targets padded with -100.
    "wav2vec2_ctc": (lambda: T.Wav2Vec2ForCTC(T.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        vocab_size=12, pad_token_id=0, ctc_loss_reduction="mean", mask_time_prob=0.0)),
        lambda: dict(input_values=torch.randn(2, 400),
                     labels=torch.tensor([[3, 4, 5, 6, 7, -100], [5, 5, 8, 9, -100, -100]]))),
    "vit": (lambda: T.ViTForImageClassification(T.ViTConfig(
        **{k: v for k, v in COMMON.items() if k not in ("vocab_size", "max_position_embeddings")},
        image_size=32, patch_size=8, num_labels=5)), images),
    "swin": (lambda: T.SwinForImageClassification(T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=5)),
        images),
    "convnext": (lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
        hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], num_labels=5, image_size=32)), images),
    # Efficient self-attention (keys and values from a strided convolution) and Mix-FFN's depthwise conv
    "segformer": (lambda: T.SegformerForImageClassification(T.SegformerConfig(
        hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], num_attention_heads=[1, 1, 1, 1], decoder_hidden_size=16,
        num_labels=4)), images),
    "clip": (lambda: T.CLIPModel(T.CLIPConfig(
        text_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                         vocab_size=101, max_position_embeddings=16),
        vision_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                           image_size=32, patch_size=8))),
        lambda: dict(input_ids=tokens(length=8), pixel_values=torch.randn(2, 3, 32, 32), return_loss=True)),
}

DROPOUTS = ("dropout", "dropout_prob", "attention_dropout", "activation_dropout", "drop_prob")


def build(name):
    """The model with every dropout (modules' and config floats read at
    forward time) and stochastic depth off, and one batch."""
    torch.manual_seed(0)
    make_model, make_batch = MODELS[name]
    model = make_model()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for attr in DROPOUTS:
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)
    return model, make_batch()


def on(batch, device):
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}


def assert_trains_like_cpu(model, batch, compiled=False, score=lambda out: out.loss):
    """One forward and backward of `score` (the model's loss) on both sides."""
    tpu_model = copy.deepcopy(model).to("tpu")
    run = torch.compile(tpu_model, backend="tpu") if compiled else tpu_model
    metrics.reset()
    cpu_loss = score(model(**batch))
    tpu_loss = score(run(**on(batch, "tpu")))
    cpu_loss.backward()
    tpu_loss.backward()
    torch.testing.assert_close(tpu_loss.cpu(), cpu_loss, rtol=1e-5, atol=0)
    for (name, p), q in zip(model.named_parameters(), tpu_model.parameters()):
        if p.grad is None:
            assert q.grad is None, name
            continue
        bound = 1e-4 * p.grad.abs().max().item() + 1e-6
        error = (q.grad.cpu() - p.grad).abs().max().item()
        assert error <= bound, f"{name}: gradient off by {error:.3g} (bound {bound:.3g})"
    assert not metrics.counters()["cpu_fallback_ops"], metrics.counters()["cpu_fallback_ops"]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_backward_matches_cpu(name):
    assert_trains_like_cpu(*build(name))


def test_mask2former_deformable_attention_matches_cpu():
    # Multi-scale deformable attention samples its features with grid_sample.
    torch.manual_seed(0)
    backbone = T.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                            window_size=4, out_features=["stage1", "stage2", "stage3", "stage4"], drop_path_rate=0.0)
    model = T.Mask2FormerForUniversalSegmentation(T.Mask2FormerConfig(
        backbone_config=backbone, feature_size=32, mask_feature_size=32, hidden_dim=32, encoder_layers=1,
        decoder_layers=2, num_attention_heads=2, dim_feedforward=64, num_queries=5, num_labels=3,
        encoder_feedforward_dim=64, common_stride=4, dropout=0.0))

    def score(out):
        return out.masks_queries_logits.pow(2).mean() + out.class_queries_logits.pow(2).mean()

    assert_trains_like_cpu(model, dict(pixel_values=torch.randn(1, 3, 64, 64)), score=score)


def test_vit_at_another_resolution_interpolates_its_position_embeddings():
    # interpolate_pos_encoding resizes the position grid bicubically.
    model, batch = build("vit")
    batch = dict(batch, pixel_values=torch.randn(2, 3, 48, 40), interpolate_pos_encoding=True)
    assert_trains_like_cpu(model, batch)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "fnet"])
def test_compiled_forward_backward_matches_cpu(name):
    assert_trains_like_cpu(*build(name), compiled=True)


@pytest.mark.parametrize("name", ["gpt2", "llama", "mixtral", "t5"])
def test_greedy_generate_matches_cpu(name):
    model, _ = build(name)
    model.eval()
    ids = tokens(length=5, low=1)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # left padding on one row
    options = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    expected = model.generate(ids, attention_mask=mask, **options)
    metrics.reset()
    actual = copy.deepcopy(model).to("tpu").generate(ids.to("tpu"), attention_mask=mask.to("tpu"), **options)
    assert torch.equal(actual.cpu(), expected)
    assert not metrics.counters()["cpu_fallback_ops"], metrics.counters()["cpu_fallback_ops"]


def test_sampling_generate_runs_on_the_device():
    # Top-k 1 sampling is greedy whatever the draws: the CPU's tokens. Top-k
    # and top-p sampling draw on the tpu (multinomial), reproducibly.
    model, _ = build("llama")
    model.eval()
    ids = tokens(length=5, low=1)
    tpu_model = copy.deepcopy(model).to("tpu")
    options = dict(max_new_tokens=6, pad_token_id=0, do_sample=True)
    expected = model.generate(ids, top_k=1, **options)
    metrics.reset()
    assert torch.equal(tpu_model.generate(ids.to("tpu"), top_k=1, **options).cpu(), expected)
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append(tpu_model.generate(ids.to("tpu"), top_k=20, top_p=0.9, temperature=0.8, **options).cpu())
    assert torch.equal(runs[0], runs[1]) and runs[0].shape == expected.shape
    assert not metrics.counters()["cpu_fallback_ops"], metrics.counters()["cpu_fallback_ops"]
