"""Training does not leak device memory: over 100 steps of a tiny minGPT, the
device memory in use at the same point of every step (after backward, before
the optimizer step) stays the same once the first steps have created the
optimizer's state."""
import pathlib
import sys

import torch

import torch_tpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import common  # noqa: E402
import mingpt  # noqa: E402

STEPS = 100
WARMUP = 2  # AdamW's moments appear in step 1's optimizer step


def test_training_memory_is_flat():
    cfg = mingpt.Config(block_size=8, n_layer=1, n_head=2, n_embd=16, batch_size=2, dropout=0.0)
    model = mingpt.build(cfg, seed=0).to("tpu")
    torch_tpu.metrics.reset()
    allocated = []

    def record(step, m):
        torch.tpu.synchronize()
        allocated.append(torch.tpu.memory_allocated())

    common.train(model, mingpt.make_optimizer(model, cfg), mingpt.loss_fn,
                 mingpt.make_batches(cfg, STEPS), torch.device("tpu"), log_every=0, callback=record)
    steady = allocated[WARMUP:]
    assert steady == [steady[0]] * len(steady), (
        f"memory_allocated per step drifts: first {allocated[:6]}, last {allocated[-3:]}")
    assert torch_tpu.metrics.counters()["cpu_fallback"] == 0, \
        torch_tpu.metrics.counters()["cpu_fallback_ops"]
