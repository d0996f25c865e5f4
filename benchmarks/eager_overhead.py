"""Per-op eager overhead: add on 1,024 floats and mm 256x512 @ 512x512, each
op taking the previous one's result (so fused mode can neither drop nor merge
them), on tpu
in strict and in fused eager mode and replayed as a graph, on PyTorch's CPU
backend, and on CUDA where PyTorch has it, measured in one run. Prints
microseconds per op (the time to issue `iters` ops and wait for the last) and
each tpu side's ratio to the CPU. Fused records the ops and runs them as one
program at the sync; the graph side captures GRAPH_OPS chained ops once in a
torch.tpu.Graph and times its replays (one program each; the capture and its
compile are not timed, as with CUDA graphs)."""
import argparse
import time

import torch
import torch_tpu


def timed_us(chain, sync, iters):
    x, step = chain
    start = time.perf_counter()
    for _ in range(iters):
        x = step(x)
    sync()
    return (time.perf_counter() - start) / iters * 1e6


def tpu_side(mode):
    def timed(chain, iters):
        with torch_tpu.eager_mode(mode):
            return timed_us(chain, torch.tpu.synchronize, iters)
    return timed


GRAPH_OPS = 100


def tpu_graph_side():
    captured = {}  # id(chain) -> (graph, its output)

    def timed(chain, iters):
        x, step = chain
        if id(chain) not in captured:
            graph = torch.tpu.Graph()
            with graph:
                y = x
                for _ in range(GRAPH_OPS):
                    y = step(y)
            captured[id(chain)] = (graph, y)
        graph = captured[id(chain)][0]
        replays = max(iters // GRAPH_OPS, 1)
        start = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        torch.tpu.synchronize()
        return (time.perf_counter() - start) / (replays * GRAPH_OPS) * 1e6
    return timed


def best_us(sides, iters, repeats):
    """Best per-op time of each side over `repeats` alternating rounds, so
    all see the same machine load. sides: name -> (chain, timed(chain, iters)), a chain
    being (first input, op)."""
    for chain, timed in sides.values():
        timed(chain, 3)
    best = dict.fromkeys(sides, float("inf"))
    for _ in range(repeats):
        for name, (chain, timed) in sides.items():
            best[name] = min(best[name], timed(chain, iters))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    cases = {
        "add 1024 f32": lambda d: (lambda b: (torch.randn(1024, device=d), lambda x: x + b))(
            torch.randn(1024, device=d)),
        # w scaled so that the product keeps x's size (no overflow, no denormals)
        "mm 256x512 @ 512x512 f32": lambda d: (lambda w: (torch.randn(256, 512, device=d), lambda x: x @ w))(
            torch.randn(512, 512, device=d) / 512 ** 0.5),
    }
    timers = {"strict": ("tpu", tpu_side("strict")), "fused": ("tpu", tpu_side("fused")),
              "graph": ("tpu", tpu_graph_side()),
              "cpu": ("cpu", lambda chain, iters: timed_us(chain, lambda: None, iters))}
    if torch.cuda.is_available():
        timers["cuda"] = ("cuda", lambda chain, iters: timed_us(chain, torch.cuda.synchronize, iters))
    print(f"on {torch.tpu.get_device_name()}: microseconds per op")
    print(f"{'op':26} " + " ".join(f"{name + ' us':>10}" for name in timers)
          + f" {'strict/cpu':>10} {'fused/cpu':>10} {'graph/cpu':>10}")
    for name, make in cases.items():
        iters = args.iters if name.startswith("add") else max(args.iters // 20, 20)
        sides = {side: (make(dev), timed) for side, (dev, timed) in timers.items()}
        us = best_us(sides, iters, args.repeats)
        print(f"{name:26} " + " ".join(f"{us[side]:10.2f}" for side in timers)
              + f" {us['strict'] / us['cpu']:10.2f} {us['fused'] / us['cpu']:10.2f} {us['graph'] / us['cpu']:10.2f}",
              flush=True)


if __name__ == "__main__":
    main()
