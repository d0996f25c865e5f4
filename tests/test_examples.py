"""The examples train on tpu exactly as on PyTorch's CPU backend: the same
initial weights (built on CPU with a fixed seed, then deep-copied to tpu) and
the same batches (generated on CPU) give the same loss at every step and the
same gradients after the first step; generation gives the same greedy tokens.
Nothing may run through the CPU fallback.

Configurations are small so the file stays quick, and dropout is 0 (minGPT's
default 0.1 draws different random masks on the two devices). Each one trains
stably: float32 and float64 runs on the CPU agree within 1e-6 over its 20
steps, so a larger tpu difference is the tpu's. (The tiny ResNet-18, with two
blocks a stage, is chaotic instead: a max-pool or ReLU decision that flips
on a rounding difference moves its CPU float32 and float64 losses apart by
1e-2 within 20 steps. So the parity ResNet has one block a stage.)"""
import copy
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tpu
from parity import assert_close

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import common  # noqa: E402
import decoder  # noqa: E402  (llama.py and qwen.py's model)
import dlrm  # noqa: E402
import llama  # noqa: E402
import mingpt  # noqa: E402
import qwen  # noqa: E402
import resnet  # noqa: E402
import unet  # noqa: E402

STEPS = 20
LOSS_RTOL = 1e-3  # every step's loss, relative to the CPU's
# Gradients after step 1, per model (rtol, atol). The deep models sum many
# more products per gradient; XLA orders those sums differently from ATen.
GRAD_TOL = {"mingpt": (1e-4, 1e-5), "mingpt-sdpa": (1e-4, 1e-5), "llama": (1e-4, 1e-5), "qwen": (1e-4, 1e-5),
            "dlrm": (1e-4, 1e-5), "resnet": (1e-4, 1e-5), "unet": (1e-4, 1e-5)}
DECODER = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=64, max_seq_len=40,
               batch_size=4, seq_len=16)
MODELS = {
    "mingpt": (mingpt, mingpt.Config(block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                     batch_size=4)),
    # GPT-2's attention as benchmarks/gpt2_step.py runs it: scaled_dot_product_attention, causal
    "mingpt-sdpa": (mingpt, mingpt.Config(block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                          batch_size=4, attention="sdpa")),
    "llama": (decoder, llama.config(**DECODER)),
    "qwen": (decoder, qwen.config(**DECODER)),
    "resnet": (resnet, resnet.Config(widths=(8, 16, 16, 32), blocks=(1, 1, 1, 1), image_size=16,
                                     batch_size=16)),
    "dlrm": (dlrm, dlrm.Config(table_sizes=(100, 50, 200), mean_tables=(1,), bottom=(16,),
                               top=(16,), embedding_dim=8, batch_size=16)),
    "unet": (unet, unet.Config(widths=(8, 16, 32), groups=4, image_size=16, batch_size=4)),
}


def train(example, cfg, model, batches, dev):
    """Losses of every step and (name -> CPU copy of the gradient) of step 1."""
    grads = {}

    def keep_first_grads(step, m):
        if step == 1:
            grads.update({n: p.grad.detach().cpu().clone() for n, p in m.named_parameters()})

    losses = common.train(model, example.make_optimizer(model, cfg), example.loss_fn, batches,
                          dev, log_every=0, callback=keep_first_grads)
    return losses, grads


@pytest.mark.parametrize("name", MODELS)
def test_training_matches_cpu(name):
    example, cfg = MODELS[name]
    cpu_model = example.build(cfg, seed=0)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    if getattr(cfg, "tie_embeddings", False):  # qwen: one Parameter, also on tpu
        assert tpu_model.lm_head.weight is tpu_model.embed.weight
    batches = example.make_batches(cfg, STEPS, seed=0)
    torch_tpu.metrics.reset()

    tpu_losses, tpu_grads = train(example, cfg, tpu_model, batches, torch.device("tpu"))
    cpu_losses, cpu_grads = train(example, cfg, cpu_model, batches, torch.device("cpu"))

    for step, (t, c) in enumerate(zip(tpu_losses, cpu_losses), 1):
        assert abs(t - c) <= LOSS_RTOL * abs(c), f"step {step}: tpu loss {t} vs cpu {c}"
    assert tpu_grads.keys() == cpu_grads.keys()
    rtol, atol = GRAD_TOL[name]
    for n in cpu_grads:
        torch.testing.assert_close(tpu_grads[n], cpu_grads[n], rtol=rtol, atol=atol,
                                   msg=lambda m: f"gradient of {n} after step 1: {m}")
    for (n, t), c in zip(tpu_model.named_buffers(), cpu_model.buffers()):
        assert_close(t, c, rtol=LOSS_RTOL, atol=1e-4)  # e.g. BatchNorm's running statistics

    if hasattr(cpu_model, "generate"):  # the language models
        # The first batch's inputs as prompts: the training shapes, so the
        # forward programs compiled for training serve the prompt too.
        prompt, new_tokens = batches[0][0], 8
        cpu_model.eval()
        expected = cpu_model.generate(prompt, new_tokens)
        generator = copy.deepcopy(cpu_model).to("tpu")
        actual = generator.generate(prompt.to("tpu"), new_tokens)
        assert torch.equal(actual.cpu(), expected), f"greedy tokens {actual} vs cpu {expected}"
        # Sampling from the top 1 token runs the sampler's every op (topk,
        # masking, softmax, exponential draws) and must pick the greedy token.
        sampled = generator.generate(prompt.to("tpu"), new_tokens, temperature=0.8, top_k=1)
        assert torch.equal(sampled.cpu(), expected), f"top-1 samples {sampled} vs greedy {expected}"

    counters = torch_tpu.metrics.counters()
    assert counters["cpu_fallback"] == 0, f"ops run on the CPU: {counters['cpu_fallback_ops']}"


def test_mingpt_script_trains_samples_and_reports():
    """The script `make demo` runs, cut down: training lines, the sample and
    the report of where it ran."""
    out = subprocess.run([sys.executable, str(EXAMPLES / "mingpt.py"), "--steps", "2", "--sample", "5",
                          "--report"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("parameters on tpu")
    assert [line.split()[:2] for line in lines[1:3]] == [["step", "1"], ["step", "2"]]
    assert any(line.startswith("--- sample") for line in lines)
    assert lines[-1].startswith(f"ran on {torch.tpu.get_device_name()}: ")
    assert " 0 ops on the CPU fallback" in lines[-1]
