"""Per-op eager overhead: add on 1,024 floats and mm 256x512 @ 512x256, on tpu
and on PyTorch's CPU backend, measured in one run. Prints microseconds per op
and the tpu/cpu ratio."""
import argparse
import time

import torch
import torch_tpu  # noqa: F401  (autoloaded too; explicit for clarity)


def per_op_us(fn, device, iters, warmup=50):
    for _ in range(warmup):
        fn()
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    sync()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / iters * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    cases = {
        "add 1024 f32": lambda d: (lambda a, b: (lambda: a + b))(
            torch.randn(1024, device=d), torch.randn(1024, device=d)),
        "mm 256x512 @ 512x256 f32": lambda d: (lambda a, b: (lambda: a @ b))(
            torch.randn(256, 512, device=d), torch.randn(512, 256, device=d)),
    }
    print(f"{'op':28} {'tpu us':>10} {'cpu us':>10} {'tpu/cpu':>8}")
    for name, make in cases.items():
        iters = args.iters if name.startswith("add") else max(args.iters // 20, 20)
        tpu = per_op_us(make("tpu"), "tpu", iters)
        cpu = per_op_us(make("cpu"), "cpu", iters)
        print(f"{name:28} {tpu:10.2f} {cpu:10.2f} {tpu / cpu:8.2f}")


if __name__ == "__main__":
    main()
