"""One GPT-2-small training step (124M parameters, tied embeddings, 12 layers
of 12 heads over 768 features, F.scaled_dot_product_attention): AdamW on
random tokens, bfloat16 autocast, batch 16 x 1,024 tokens. Prints ms per
step, tokens per second and model FLOP utilisation (MFU) against a peak
(default 989 TFLOP/s, an H100/H200's dense bf16).

Each side runs in its own process, one after another in one run: no two
device allocators share the GPU, and the CUDA sides run with PyTorch's
backend autoload off: PyTorch allows one accelerator per process, and once
the tpu device is registered it is the one (at::getAccelerator()), which
breaks autograd on CUDA tensors (an internal assert in its engine):

  tpu-compiled   torch.compile(backend="tpu") of model and optimizer step
  tpu-fused      tpu, fused eager
  tpu-strict     tpu, strict eager
  cuda-inductor  PyTorch on CUDA through torch.compile (inductor), where CUDA is
  cuda           PyTorch on CUDA, eager
  cpu            PyTorch's CPU backend, eager (use with --size mid or tiny)

FLOPs per step follow nanoGPT's count: 6 N + 12 L E T per token, N the
parameters less the position embeddings, L layers, E features, T tokens
(causal attention counted whole). Every step ends with the loss read on the
host. Each side but fused then runs one more step awaited after each phase
(forward and loss, backward, optimizer step) and prints the three times. The tpu sides run on the PJRT plugin torch_tpu finds: on a machine
with an NVIDIA GPU and JAX's CUDA plugin installed, that one.

    python benchmarks/gpt2_step.py --sides tpu-compiled cuda-inductor
    python benchmarks/gpt2_step.py --size tiny --sides cpu tpu-compiled --steps 3
    python benchmarks/gpt2_step.py --size mid --sides cpu tpu-compiled tpu-fused tpu-strict --steps 3
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import mingpt  # noqa: E402

SIZES = {  # (config, vocabulary): GPT-2 small's vocabulary padded to a multiple of 64, as nanoGPT does
    "124m": (mingpt.Config(block_size=1024, n_layer=12, n_head=12, n_embd=768, dropout=0.0, batch_size=16,
                           lr=6e-4, attention="sdpa"), 50304),
    # GPT-2's vocabulary and shapes at a size a 2-core CPU runs in seconds a step
    "mid": (mingpt.Config(block_size=256, n_layer=4, n_head=4, n_embd=256, dropout=0.0, batch_size=4,
                          lr=6e-4, attention="sdpa"), 50304),
    "tiny": (mingpt.Config(block_size=64, n_layer=2, n_head=2, n_embd=64, dropout=0.0, batch_size=2,
                           lr=6e-4, attention="sdpa"), 512),
}
SIDES = ("tpu-compiled", "tpu-fused", "tpu-strict", "cuda-inductor", "cuda", "cpu")


def build(size):
    cfg, vocab = SIZES[size]
    torch.manual_seed(0)
    model = mingpt.GPT(cfg, vocab)
    model.head.weight = model.wte.weight  # GPT-2 ties its output layer to the token embeddings
    return model, cfg, vocab


def flops_per_step(model, cfg):
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    per_token = 6 * n + 12 * cfg.n_layer * cfg.n_embd * cfg.block_size
    return per_token * cfg.block_size * cfg.batch_size, n


def run_side(side, size, steps, warmup):
    """ms per step of one side, in this process."""
    dev_type = side.split("-")[0]
    if dev_type == "tpu":
        import torch_tpu
        import torch_tpu.metrics

        torch_tpu.set_eager_mode({"tpu-fused": "fused"}.get(side, "strict"))
    dev = torch.device(dev_type)
    model, cfg, vocab = build(size)
    flops, n = flops_per_step(model, cfg)
    model = model.to(dev)
    optimizer = mingpt.make_optimizer(model, cfg)
    step_model, optimizer_step = model, optimizer.step
    if side.endswith(("compiled", "inductor")):
        backend = "tpu" if dev_type == "tpu" else "inductor"
        step_model = torch.compile(model, backend=backend)
        optimizer_step = torch.compile(optimizer.step, backend=backend)
    generator = torch.Generator().manual_seed(0)
    tokens = [torch.randint(0, vocab, (cfg.batch_size, cfg.block_size + 1), generator=generator)
              for _ in range(4)]
    autocast_dtype = torch.float32 if dev_type == "cpu" else torch.bfloat16

    def step(k, mark=lambda: None):
        """One training step; mark() after the loss, the backward and the optimizer step."""
        batch = tokens[k % len(tokens)].to(dev)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(dev_type, dtype=autocast_dtype, enabled=dev_type != "cpu"):
            logits = step_model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        mark()
        loss.backward()
        mark()
        optimizer_step()
        mark()
        return loss.item()

    print(f"{side}: {n / 1e6:.1f}M parameters (less position embeddings), batch {cfg.batch_size} x "
          f"{cfg.block_size}, {flops / 1e12:.2f} TFLOP a step", flush=True)
    start = time.perf_counter()
    for k in range(warmup):
        loss = step(k)
        print(f"{side}: warm-up step {k + 1}  loss {loss:.4f}  {time.perf_counter() - start:.1f} s", flush=True)
    warmup_s = time.perf_counter() - start
    times, losses = [], []
    for k in range(steps):
        start = time.perf_counter()
        losses.append(step(warmup + k))
        times.append(time.perf_counter() - start)
        print(f"{side}: step {k + 1}  loss {losses[-1]:.4f}  {times[-1] * 1e3:.1f} ms", flush=True)
    if side != "tpu-fused":  # syncs between the phases would split fused mode's one program
        wait = {"tpu": lambda: torch.tpu.synchronize(), "cuda": lambda: torch.cuda.synchronize()}.get(
            dev_type, lambda: None)
        wait()  # a step returns once its loss is read: its backward and optimizer step may still run
        marks = [time.perf_counter()]
        step(warmup + steps, lambda: (wait(), marks.append(time.perf_counter())))
        phases = ", ".join(f"{name} {1e3 * (end - begin):.1f} ms" for name, begin, end in
                           zip(("forward and loss", "backward", "optimizer step"), marks, marks[1:]))
        print(f"{side}: one more step, awaited after each phase: {phases}", flush=True)
    if dev_type == "tpu":
        c = torch_tpu.metrics.counters()
        print(f"{side}: {c['compile']} programs compiled, {c['execute']} run, {c['disk_cache_hit']} read "
              f"from the disk cache, {c['program_unload']} unloaded", flush=True)
    return {"side": side, "ms": sorted(times)[len(times) // 2] * 1e3, "warmup_s": warmup_s,
            "flops": flops, "loss": losses[-1], "tokens": cfg.batch_size * cfg.block_size}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sides", nargs="+", choices=SIDES, default=["tpu-compiled", "cuda-inductor"])
    p.add_argument("--size", choices=list(SIZES), default="124m")
    p.add_argument("--steps", type=int, default=10, help="timed steps; the median counts")
    p.add_argument("--warmup", type=int, default=3, help="untimed first steps (compiles)")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 peak")
    p.add_argument("--timeout", type=float, default=600, help="seconds a side may take")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print("RESULT " + json.dumps(run_side(args.child, args.size, args.steps, args.warmup)), flush=True)
        return
    results = []
    for side in args.sides:
        cmd = [sys.executable, __file__, "--child", side, "--size", args.size, "--steps", str(args.steps),
               "--warmup", str(args.warmup)]
        try:
            env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0") if side.startswith("cuda") else None
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=args.timeout, env=env)
            out = proc.stdout
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            out += f"\n{side}: stopped after {args.timeout:.0f} s\n"
        print(out, end="", flush=True)
        found = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
        results.extend(found)
    print(f"\n{'side':14} {'ms/step':>9} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'warm-up s':>10} {'loss':>8}")
    for r in results:
        tflops = r["flops"] / (r["ms"] / 1e3) / 1e12
        print(f"{r['side']:14} {r['ms']:9.1f} {r['tokens'] / (r['ms'] / 1e3):10.0f} {tflops:8.1f} "
              f"{tflops / args.peak_tflops:6.1%} {r['warmup_s']:10.1f} {r['loss']:8.4f}")


if __name__ == "__main__":
    main()
