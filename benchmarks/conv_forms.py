"""Convolutions with few input features per group (an RGB stem, depthwise
and narrow grouped convolutions, the shapes the tap-by-tap and grouped weight grad
lowerings serve) and one ordinary convolution for contrast: forward,
input grad and weight grad, each a compiled tpu program and PyTorch's CPU
backend in one run. Prints microseconds per convolution (best of
alternating rounds; each tpu program holds --per-program independent
convolutions, so launch costs spread) and tpu's speed relative to CPU.

    python benchmarks/conv_forms.py [--per-program 8 --steps 10 --repeats 5]
"""
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401 (registers the tpu device)
from timing import best_ms, per_program_args

# name: (input shape, weight shape, stride, padding, groups)
CASES = {
    "stem 3->32 3x3 over 32x32": ((32, 3, 32, 32), (32, 3, 3, 3), 1, 1, 1),
    "depthwise 64 3x3 over 16x16": ((16, 64, 16, 16), (64, 1, 3, 3), 1, 1, 64),
    "depthwise 64 3x3 stride 2": ((16, 64, 16, 16), (64, 1, 3, 3), 2, 1, 64),
    "depthwise 32 7x7 over 16x16": ((16, 32, 16, 16), (32, 1, 7, 7), 1, 3, 32),
    "8 groups of 8, 3x3 over 16x16": ((16, 64, 16, 16), (64, 8, 3, 3), 1, 1, 8),
    "32 groups of 2, 3x3 over 16x16": ((16, 64, 16, 16), (64, 2, 3, 3), 1, 1, 32),
    "ungrouped 64->64 3x3 over 16x16": ((16, 64, 16, 16), (64, 64, 3, 3), 1, 1, 1),
}
PARTS = {"forward": [False, False, False], "input grad": [True, False, False], "weight grad": [False, True, False]}


def part_fn(part, stride, padding, groups):
    """One convolution's part, from its input, weight and output grad."""
    if part == "forward":
        return lambda x, w, dy: F.conv2d(x, w, None, stride, padding, 1, groups)
    mask, pick = PARTS[part], 0 if part == "input grad" else 1
    return lambda x, w, dy: torch.ops.aten.convolution_backward(
        dy, x, w, None, [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], groups, mask)[pick]


def main():
    args = per_program_args(__doc__, per_program=8, repeats=5)
    r = args.per_program
    print(f"{'convolution':34s} {'part':12s} {'tpu us':>9s} {'cpu us':>9s} {'tpu vs cpu':>10s}")
    for name, (x_shape, w_shape, stride, padding, groups) in CASES.items():
        generator = torch.Generator().manual_seed(0)
        x = [torch.randn(x_shape, generator=generator) for _ in range(r)]
        w = [torch.randn(w_shape, generator=generator) for _ in range(r)]
        dy_shape = F.conv2d(x[0], w[0], None, stride, padding, 1, groups).shape
        dy = [torch.randn(dy_shape, generator=generator) for _ in range(r)]
        on_tpu = [[t.to("tpu") for t in ts] for ts in (x, w, dy)]
        for part in PARTS:
            fn = part_fn(part, stride, padding, groups)
            program = torch.compile(lambda xs, ws, dys: [fn(*a) for a in zip(xs, ws, dys)], backend="tpu")
            sides = {"tpu": lambda: (program(*on_tpu), torch.tpu.synchronize()),
                     "cpu": lambda: fn(x[0], w[0], dy[0])}
            ms, _ = best_ms(sides, args.steps, args.repeats)
            us = {"tpu": ms["tpu"] * 1e3 / r, "cpu": ms["cpu"] * 1e3}
            print(f"{name:34s} {part:12s} {us['tpu']:9.1f} {us['cpu']:9.1f} {us['cpu'] / us['tpu']:9.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()
