"""Cold and warm start of the minGPT example: the same first training step in
two fresh processes that share one new, empty TORCH_TPU_CACHE_DIR. The first
process compiles every program and writes it to the cache; the second loads
them from disk. Prints, for each, the time from process start to the end of
the first step, the first step alone (model to device, optimizer, forward,
backward, optimizer step, loss read), the compile count, the disk hits and
how many of them the warm-start prefetch had loaded (TORCH_TPU_CACHE_PREFETCH=0
turns it off); then warm / cold of the first step.

    python benchmarks/cold_start.py [--mode strict|debug|fused] [--steps 1]

Target: the warm first step at most 10% of the cold one, with 0 compiles.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def child(steps):
    """Runs in the measured process: prints one JSON line."""
    process_start = time.perf_counter()  # the interpreter itself started just before
    import torch
    import torch_tpu

    sys.path.insert(0, str(EXAMPLES))
    import common
    import mingpt

    cfg = mingpt.Config()
    cpu_model = mingpt.build(cfg)
    batches = mingpt.make_batches(cfg, steps)
    dev = torch.device("tpu")
    # Building an optimizer imports parts of PyTorch (about 1.5 s on a small
    # VM) on any device: before the timed step, inside since_start_s.
    torch.optim.AdamW([torch.zeros(1)])
    step_start = time.perf_counter()
    model = cpu_model.to(dev)
    common.train(model, mingpt.make_optimizer(model, cfg), mingpt.loss_fn, batches, dev, log_every=0)
    torch.tpu.synchronize()  # the update too: fused mode leaves it pending after the loss read
    end = time.perf_counter()
    counters = torch_tpu.metrics.counters()
    print(json.dumps({
        "since_start_s": end - process_start,
        "first_step_s": end - step_start,
        "compiles": counters["compile"],
        "disk_hits": counters["disk_cache_hit"],
        "prefetched": counters["disk_cache_prefetched"],
        "mode": torch_tpu.get_eager_mode(),
    }))


def run_child(cache_dir, args):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir)
    if args.mode:
        env["TORCH_TPU_EAGER_MODE"] = args.mode
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps)],
                         capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = wall
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["strict", "debug", "fused"], default=None,
                   help="eager mode of both processes (default: TORCH_TPU_EAGER_MODE or strict)")
    p.add_argument("--steps", type=int, default=1, help="training steps counted as the first step")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.steps)
        return
    with tempfile.TemporaryDirectory(prefix="torch_tpu_cold_start_") as cache_dir:
        cold = run_child(cache_dir, args)
        warm = run_child(cache_dir, args)
    print(f"mingpt, {args.steps} step(s), eager mode {cold['mode']}, fresh cache directory")
    print(f"{'run':6} {'process s':>10} {'start to step s':>16} {'first step s':>13} "
          f"{'compiles':>9} {'disk hits':>10} {'prefetched':>11}")
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name:6} {r['process_s']:10.2f} {r['since_start_s']:16.2f} {r['first_step_s']:13.2f} "
              f"{r['compiles']:9d} {r['disk_hits']:10d} {r['prefetched']:11d}")
    ratio = warm["first_step_s"] / cold["first_step_s"]
    print(f"warm / cold first step: {ratio:.1%} (target <= 10%, warm compiles 0: "
          f"{'yes' if warm['compiles'] == 0 else 'no'})")


if __name__ == "__main__":
    main()
