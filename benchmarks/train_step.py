"""Per-step training time of the minGPT and ResNet examples (their default
configurations), measured in one run from the same weights and batches:

  cpu            PyTorch's CPU backend, eager
  cpu-inductor   PyTorch's CPU backend through torch.compile (inductor); --inductor
  tpu-strict     tpu, strict eager (the default mode)
  tpu-fused      tpu, fused eager
  tpu-compiled   tpu, torch.compile(backend="tpu") for model and optimizer step

Prints milliseconds per step and each column's ratio to tpu-strict and to
cpu. Every step ends with the loss read on the host, so device work is inside
the time. Sides alternate round by round and the best round counts, so all
see the same machine load.

    python benchmarks/train_step.py --steps 5 --repeats 3 [--inductor] [--config small]
"""
import argparse
import copy
import pathlib
import sys
import time

import torch
import torch._dynamo

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import common  # noqa: E402
import mingpt  # noqa: E402
import resnet  # noqa: E402

import torch_tpu  # noqa: E402

EXAMPLES = {"mingpt": mingpt, "resnet": resnet}
# "default": the examples' own configurations, where arithmetic dominates a
# step on a CPU; "small": the parity tests' ones, where per-op dispatch does.
CONFIGS = {
    "default": {"mingpt": mingpt.Config(), "resnet": resnet.Config()},
    "small": {"mingpt": mingpt.Config(block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                      batch_size=4),
              "resnet": resnet.Config(widths=(8, 16, 16, 32), blocks=(1, 1, 1, 1), image_size=16,
                                      batch_size=16)},
}


class CompiledOptimizer:
    """The optimizer step compiled. On the tpu its step counters live on the
    device (capturable), as dynamo arranges by itself for CUDA optimizers."""

    def __init__(self, optimizer, backend):
        if backend == "tpu":
            for group in optimizer.param_groups:
                group["capturable"] = True
        self.optimizer = optimizer
        self.step = torch.compile(optimizer.step, backend=backend)

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)


class Side:
    """One way of running the training step."""

    def __init__(self, name, example, cfg, cpu_model):
        self.name = name
        self.example = example
        self.dev = torch.device("cpu" if name.startswith("cpu") else "tpu")
        self.mode = {"tpu-fused": "fused"}.get(name, "strict")
        self.model = copy.deepcopy(cpu_model).to(self.dev)
        self.optimizer = example.make_optimizer(self.model, cfg)
        self.step_model = self.model
        if name.endswith(("compiled", "inductor")):
            backend = "tpu" if self.dev.type == "tpu" else "inductor"
            self.step_model = torch.compile(self.model, backend=backend)
            self.optimizer = CompiledOptimizer(self.optimizer, backend)

    def ms_per_step(self, batches):
        with torch_tpu.eager_mode(self.mode):
            start = time.perf_counter()
            common.train(self.step_model, self.optimizer, self.example.loss_fn, batches, self.dev,
                         log_every=0)
            return (time.perf_counter() - start) / len(batches) * 1e3


def measure(example, cfg, sides, steps, repeats, warmup):
    cpu_model = example.build(cfg)
    runners = [Side(name, example, cfg, cpu_model) for name in sides]
    batches = example.make_batches(cfg, warmup + steps * repeats)
    warmup_s = {}
    for r in runners:  # compiles every program each side needs
        start = time.perf_counter()
        r.ms_per_step(batches[:warmup])
        warmup_s[r.name] = time.perf_counter() - start
    best = {r.name: float("inf") for r in runners}
    for k in range(repeats):
        round_batches = batches[warmup + k * steps:warmup + (k + 1) * steps]
        for r in runners:
            best[r.name] = min(best[r.name], r.ms_per_step(round_batches))
    return best, warmup_s


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5, help="timed steps per round")
    p.add_argument("--repeats", type=int, default=3, help="rounds; the best counts")
    p.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    p.add_argument("--models", nargs="+", choices=list(EXAMPLES), default=list(EXAMPLES))
    p.add_argument("--inductor", action="store_true", help="also time PyTorch inductor on the CPU")
    p.add_argument("--config", choices=list(CONFIGS), default="default")
    args = p.parse_args()
    common.device("tpu")
    sides = ["cpu"] + (["cpu-inductor"] if args.inductor else []) + ["tpu-strict", "tpu-fused",
                                                                      "tpu-compiled"]
    print(f"{'model':8} {'side':13} {'ms/step':>9} {'vs strict':>10} {'vs cpu':>8} {'warm-up s':>10}")
    for name in args.models:
        example, cfg = EXAMPLES[name], CONFIGS[args.config][name]
        torch._dynamo.reset()
        best, warmup_s = measure(example, cfg, sides, args.steps, args.repeats, args.warmup)
        for side in sides:
            print(f"{name:8} {side:13} {best[side]:9.1f} {best['tpu-strict'] / best[side]:9.2f}x "
                  f"{best['cpu'] / best[side]:7.2f}x {warmup_s[side]:10.1f}", flush=True)


if __name__ == "__main__":
    main()
