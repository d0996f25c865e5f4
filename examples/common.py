"""What every example shares: the command line, the device, the training loop
(printing step, loss and steps per second), and training text that ships with
Python itself, so no example downloads anything."""
import argparse
import importlib
import pathlib
import time

import torch
import torch._dynamo


def parser(description):
    """The flags every example takes; a script adds its own before parsing."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="training steps")
    p.add_argument("--device", choices=["tpu", "cpu"], default="tpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=1, help="print every N steps")
    p.add_argument("--report", action="store_true",
                   help="end with the tpu device's name and the programs the run took")
    p.add_argument("--compile", action="store_true",
                   help="run each training step as a compiled function (compiled_step)")
    return p


def device(name):
    """The torch.device for --device; importing torch_tpu registers "tpu"."""
    if name == "tpu":
        import torch_tpu  # noqa: F401  (autoloaded too; explicit for clarity)

        if not torch.tpu.is_available():
            raise SystemExit("no tpu device: check the PJRT plugin (torch_tpu.metrics.report())")
    return torch.device(name)


def batches(make_batch, steps, seed):
    """`steps` batches of make_batch(generator), all drawn from one generator
    seeded with `seed`: the same data for every device and every run."""
    generator = torch.Generator().manual_seed(seed)
    return [make_batch(generator) for _ in range(steps)]


def build_and_train(example, cfg, args):
    """How every example's script starts: the model of example.build(cfg) on
    --device, trained for --steps batches of example.make_batches with
    example.make_optimizer and example.loss_fn. Returns (model, device)."""
    dev = device(args.device)
    model = example.build(cfg, args.seed).to(dev)
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters on {dev}")
    optimizer = example.make_optimizer(model, cfg)
    step_fn = compiled_step(model, optimizer, example.loss_fn, args.device) if args.compile else None
    train(model, optimizer, example.loss_fn, example.make_batches(cfg, args.steps, args.seed), dev,
          args.log_every, step_fn=step_fn)
    return model, dev


def report(args):
    """With --report on tpu: where the run ran and the programs it took."""
    if args.report and args.device == "tpu":
        import torch_tpu.metrics

        c = torch_tpu.metrics.counters()
        print(f"ran on {torch.tpu.get_device_name()}: {c['execute']:,} programs run, {c['compile']} "
              f"compiled and {c['disk_cache_hit']} read from the compile cache, {c['cpu_fallback']} ops "
              "on the CPU fallback (more in torch_tpu.metrics.report())")


def to_device(batch, dev):
    return tuple(t.to(dev) for t in batch)


def compiled_step(model, optimizer, loss_fn, device="tpu"):
    """One training step (forward, loss, backward, optimizer step) as one
    function compiled by torch.compile, with the backend for `device` ("tpu",
    or inductor on "cpu"): step(batch) -> the loss, detached. Gradients must be
    zeroed before each call (dynamo does not trace Optimizer.zero_grad).

    With dynamo's trace_autograd_ops, loss.backward() is traced instead of
    breaking the graph, so forward and backward are one program; torch.optim
    breaks the graph around its step, so the update is a second one. The loss
    is detached before that break: a tensor that crosses it with the backward's
    graph would make dynamo give up on tracing the backward."""

    def step(batch):
        loss = loss_fn(model, batch)
        loss.backward()
        loss = loss.detach()
        optimizer.step()
        return loss

    compiled = torch.compile(step, backend="tpu" if device == "tpu" else "inductor")
    return torch._dynamo.config.patch(trace_autograd_ops=True)(compiled)


def train(model, optimizer, loss_fn, batches, dev, log_every=1, callback=None, step_fn=None):
    """Runs one optimizer step per batch (CPU tensors, moved here) and returns
    the losses as floats. Reading each loss is a sync point, so the printed
    rate includes the device's work and no step's tensors outlive it. Prints
    step, loss and steps per second every `log_every` steps (0: silent).
    `callback(step, model)` runs once a step's gradients exist, e.g. to read
    them or memory: between backward and optimizer step, or after
    `step_fn(batch)`, which (as compiled_step's does) replaces the loss,
    backward and optimizer step and leaves the gradients in place."""
    model.train()
    losses = []
    start, last_step = time.perf_counter(), 0
    for step, batch in enumerate(batches, 1):
        optimizer.zero_grad(set_to_none=True)
        batch = to_device(batch, dev)
        if step_fn is not None:
            loss = step_fn(batch)
            if callback is not None:
                callback(step, model)
        else:
            loss = loss_fn(model, batch)
            loss.backward()
            if callback is not None:
                callback(step, model)
            optimizer.step()
        losses.append(loss.item())
        if log_every and (step % log_every == 0 or step == len(batches)):
            now = time.perf_counter()
            rate = (step - last_step) / (now - start)
            print(f"step {step:5d}  loss {losses[-1]:.4f}  {rate:7.2f} steps/s", flush=True)
            start, last_step = now, step
    return losses


def stdlib_text(modules=("textwrap", "string", "fractions", "heapq")):
    """The source of a few standard-library modules: real text that every
    Python installation has, read from disk rather than downloaded."""
    parts = [pathlib.Path(importlib.import_module(m).__file__).read_text(encoding="utf-8")
             for m in modules]
    return "\n".join(parts)


def random_windows(data, block, batch, generator):
    """A batch of (input, next-token target) windows at random offsets of a
    1-D token tensor."""
    starts = torch.randint(len(data) - block - 1, (batch,), generator=generator)
    x = torch.stack([data[s:s + block] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + block + 1] for s in starts.tolist()])
    return x, y


def sample_next(logits, temperature=0.0, top_k=None):
    """The next token for each row of `logits` (batch, vocab): the argmax when
    temperature is 0, else a draw from softmax(logits / temperature) limited to
    the top_k most likely tokens. The draw is the exponential-race form of
    sampling (argmax of p / E with E ~ Exp(1)), which keeps every step on the
    device with fixed shapes."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return (probs / torch.empty_like(probs).exponential_()).argmax(-1)
