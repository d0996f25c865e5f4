"""Per-step training time of the minGPT and ResNet examples (their default
configurations) on tpu, in the default eager mode, and on PyTorch's CPU
backend, measured in one run from the same weights and batches. Prints
milliseconds per step and the tpu/cpu ratio.

    python benchmarks/train_step.py --steps 5 --repeats 3
"""
import argparse
import copy
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import common  # noqa: E402
import mingpt  # noqa: E402
import resnet  # noqa: E402

EXAMPLES = {"mingpt": (mingpt, mingpt.Config()), "resnet": (resnet, resnet.Config())}


def step_ms(model, optimizer, example, batches, dev):
    """Mean milliseconds per step over `batches`; each step ends with the
    loss read on the host, so the device's work is inside the time."""
    start = time.perf_counter()
    common.train(model, optimizer, example.loss_fn, batches, dev, log_every=0)
    return (time.perf_counter() - start) / len(batches) * 1e3


def measure(example, cfg, steps, repeats, warmup):
    """Best time per step of each side over alternating rounds, so both see
    the same machine load; the warm-up steps compile the tpu programs."""
    sides = {}
    cpu_model = example.build(cfg)
    for dev, model in (("tpu", copy.deepcopy(cpu_model).to("tpu")), ("cpu", cpu_model)):
        sides[dev] = (model, example.make_optimizer(model, cfg))
    batches = example.make_batches(cfg, warmup + steps * repeats)
    start = time.perf_counter()
    step_ms(*sides["tpu"], example, batches[:warmup], torch.device("tpu"))
    compile_s = time.perf_counter() - start
    step_ms(*sides["cpu"], example, batches[:warmup], torch.device("cpu"))
    best = {"tpu": float("inf"), "cpu": float("inf")}
    for r in range(repeats):
        round_batches = batches[warmup + r * steps:warmup + (r + 1) * steps]
        for dev, (model, optimizer) in sides.items():
            best[dev] = min(best[dev], step_ms(model, optimizer, example, round_batches,
                                               torch.device(dev)))
    return best["tpu"], best["cpu"], compile_s


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5, help="timed steps per round")
    p.add_argument("--repeats", type=int, default=3, help="rounds; the best counts")
    p.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    p.add_argument("--models", nargs="+", choices=list(EXAMPLES), default=list(EXAMPLES))
    args = p.parse_args()
    common.device("tpu")
    print(f"{'model':8} {'params':>10} {'tpu ms/step':>12} {'cpu ms/step':>12} {'tpu/cpu':>8} "
          f"{'tpu warm-up s':>14}")
    for name in args.models:
        example, cfg = EXAMPLES[name]
        params = sum(p.numel() for p in example.build(cfg).parameters())  # cheap on CPU
        tpu, cpu, compile_s = measure(example, cfg, args.steps, args.repeats, args.warmup)
        print(f"{name:8} {params:10,} {tpu:12.1f} {cpu:12.1f} {tpu / cpu:8.2f} {compile_s:14.1f}",
              flush=True)


if __name__ == "__main__":
    main()
