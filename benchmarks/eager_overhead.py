"""Per-op eager overhead: add on 1,024 floats and mm 256x512 @ 512x256, on tpu
and on PyTorch's CPU backend, measured in one run. Prints microseconds per op
and the tpu/cpu ratio."""
import argparse
import time

import torch
import torch_tpu  # noqa: F401  (autoloaded too; explicit for clarity)


def timed_us(fn, sync, iters):
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - start) / iters * 1e6


def compare(tpu_fn, cpu_fn, iters, repeats):
    """Best per-op time of each side over `repeats` alternating rounds, so
    both see the same machine load."""
    for _ in range(3):
        tpu_fn(), cpu_fn()
    torch.tpu.synchronize()
    tpu = cpu = float("inf")
    for _ in range(repeats):
        tpu = min(tpu, timed_us(tpu_fn, torch.tpu.synchronize, iters))
        cpu = min(cpu, timed_us(cpu_fn, lambda: None, iters))
    return tpu, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    cases = {
        "add 1024 f32": lambda d: (lambda a, b: (lambda: a + b))(
            torch.randn(1024, device=d), torch.randn(1024, device=d)),
        "mm 256x512 @ 512x256 f32": lambda d: (lambda a, b: (lambda: a @ b))(
            torch.randn(256, 512, device=d), torch.randn(512, 256, device=d)),
    }
    print(f"{'op':28} {'tpu us':>10} {'cpu us':>10} {'tpu/cpu':>8}")
    for name, make in cases.items():
        iters = args.iters if name.startswith("add") else max(args.iters // 20, 20)
        tpu, cpu = compare(make("tpu"), make("cpu"), iters, args.repeats)
        print(f"{name:28} {tpu:10.2f} {cpu:10.2f} {tpu / cpu:8.2f}")


if __name__ == "__main__":
    main()
