"""Timing shared by the per-op benchmarks: every side is warmed up (its
programs compiled) and then timed in alternating rounds, so all see the same
machine load, and each side's best round counts."""
import argparse
import time

import torch
import torch._dynamo


def best_ms(sides, steps, repeats):
    """{side: milliseconds per call of its step, best round}, and what each
    step returned at warm-up."""
    forms = {name: step() for name, step in sides.items()}  # compiles every program
    best = dict.fromkeys(sides, float("inf"))
    for _ in range(repeats):
        for name, step in sides.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            best[name] = min(best[name], (time.perf_counter() - start) / steps * 1e3)
    return best, forms


def per_program_args(doc, per_program, repeats):
    """The command line of a benchmark that puts --per-program independent
    copies of each case in one tpu program (so a launch spreads over them).
    Each case compiles programs of its own, so dynamo may keep more of them
    than its default limit."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-program", type=int, default=per_program)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=repeats)
    torch._dynamo.config.recompile_limit = torch._dynamo.config.cache_size_limit = 64
    return parser.parse_args()
