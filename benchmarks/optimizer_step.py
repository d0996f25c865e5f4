"""One AdamW step over a model-sized parameter set, on PyTorch's CPU backend
and on tpu in strict and fused eager mode and compiled (torch.compile of
optimizer.step), measured in one run, in PyTorch's two multi-tensor forms:
foreach (the default; one program per _foreach_ op on tpu) and fused=True
(one _fused_adamw_ call: on tpu one program for the update and one for the
step counters). The step reads and rewrites every parameter and both of
its moments: on tpu each of those storages is written in place (its buffer
donated to the program), so the in_place_write counter grows by three per
parameter a step.

Prints milliseconds per step (median of --steps, after two warm-up steps),
each side's ratio to the CPU's foreach step, and the storages a step wrote
in place."""
import argparse
import statistics
import time

import torch
import torch_tpu
import torch_tpu.metrics


def make_optimizer(device, tensors, numel, form, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shape = (numel // tensors // 256, 256)
    params = [torch.nn.Parameter(torch.randn(shape, generator=generator).to(device)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn(shape, generator=generator).to(device) * 1e-2
    if form == "fused":
        return torch.optim.AdamW(params, lr=1e-3, fused=True)
    return torch.optim.AdamW(params, lr=1e-3, foreach=True)


def timed_steps(step, sync, steps):
    """Median ms of `steps` steps after two warm-up ones (the first makes
    the moments and compiles), and the storages a step wrote in place."""
    for _ in range(2):
        step()
    sync()
    before = torch_tpu.metrics.counters()["in_place_write"]
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    writes = (torch_tpu.metrics.counters()["in_place_write"] - before) / steps
    return statistics.median(times), writes


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tensors", type=int, default=16)
    parser.add_argument("--numel", type=int, default=16 * 1024 * 1024, help="parameters in all")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    print(f"AdamW over {args.tensors} tensors, {args.numel / 1e6:.1f}M float32 parameters, "
          f"on {torch.tpu.get_device_name()}")
    print(f"{'side':14} {'form':8} {'ms/step':>9} {'vs cpu':>8} {'in place':>9}")
    cpu_ms = None
    sides = [("cpu", "foreach"), ("cpu", "fused"), ("tpu strict", "foreach"), ("tpu strict", "fused"),
             ("tpu fused", "foreach"), ("tpu fused", "fused"), ("tpu compiled", "foreach")]
    for side, form in sides:
        device = "cpu" if side == "cpu" else "tpu"
        optimizer = make_optimizer(device, args.tensors, args.numel, form)
        step = torch.compile(optimizer.step, backend="tpu") if side == "tpu compiled" else optimizer.step
        sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
        mode = "fused" if side == "tpu fused" else "strict"
        with torch_tpu.eager_mode(mode):
            ms, writes = timed_steps(step, sync, args.steps)
        cpu_ms = cpu_ms or ms
        print(f"{side:14} {form:8} {ms:9.2f} {cpu_ms / ms:7.2f}x {writes:9.0f}", flush=True)


if __name__ == "__main__":
    main()
