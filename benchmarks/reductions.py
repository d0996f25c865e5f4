"""Reductions over long rows and columns (the shapes a training step reduces:
softmax and layer norm rows, bias and norm weight gradients down columns,
a loss over everything), each a compiled tpu program and PyTorch's CPU
backend in one run. Prints microseconds per reduction (best of alternating
rounds; each side sums --per-program independent reductions, so a tpu
program's launch and its output spread over them) and tpu's speed relative
to CPU.

    python benchmarks/reductions.py [--per-program 32 --steps 10 --repeats 7]
"""
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401 (registers the tpu device)
from timing import best_ms, per_program_args

# name: (function, input shape)
CASES = {
    "row sums [1024, 128]": (lambda x: x.sum(-1), (1024, 128)),
    "row sums [1024, 512]": (lambda x: x.sum(-1), (1024, 512)),
    "row maxima [4096, 64]": (lambda x: x.amax(-1), (4096, 64)),
    "column sums [1024, 512]": (lambda x: x.sum(0), (1024, 512)),
    "column sums [16, 64, 128] -> [128]": (lambda x: x.sum((0, 1)), (16, 64, 128)),
    "column sums [16384, 128]": (lambda x: x.sum(0), (16384, 128)),
    "sum of all [1024, 512]": (lambda x: x.sum(), (1024, 512)),
    "softmax [4096, 64]": (lambda x: x.softmax(-1), (4096, 64)),
    "layer norm [1024, 128]": (lambda x: F.layer_norm(x, (128,)), (1024, 128)),
}


def main():
    args = per_program_args(__doc__, per_program=32, repeats=7)
    r = args.per_program
    print(f"{'reduction':36s} {'tpu us':>9s} {'cpu us':>9s} {'tpu vs cpu':>10s}")
    for name, (fn, shape) in CASES.items():
        generator = torch.Generator().manual_seed(0)
        xs = [torch.randn(shape, generator=generator) for _ in range(r)]
        on_tpu = [x.to("tpu") for x in xs]
        summed = lambda xs, fn=fn: sum(fn(x) for x in xs)  # noqa: E731
        program = torch.compile(summed, backend="tpu")
        sides = {"tpu": lambda: (program(on_tpu), torch.tpu.synchronize()), "cpu": lambda: summed(xs)}
        ms, _ = best_ms(sides, args.steps, args.repeats)
        us = {side: ms[side] * 1e3 / r for side in sides}
        print(f"{name:36s} {us['tpu']:9.1f} {us['cpu']:9.1f} {us['cpu'] / us['tpu']:9.2f}x", flush=True)


if __name__ == "__main__":
    main()
