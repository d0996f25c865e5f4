"""Per-step training time of the minGPT and ResNet examples (their default
configurations), measured in one run from the same weights and batches:

  cpu            PyTorch's CPU backend, eager
  cpu-inductor   PyTorch's CPU backend through torch.compile (inductor): forward
                 with loss, and optimizer step; --inductor
  tpu-strict     tpu, strict eager (the default mode)
  tpu-fused      tpu, fused eager
  tpu-compiled   tpu, torch.compile(backend="tpu") for forward with loss (one
                 function: the loss inside the graph, as in the JAX step) and
                 for the optimizer step
  tpu-compiled-step  tpu, the whole step as one compiled function
                 (examples/common.py's compiled_step: dynamo traces
                 loss.backward(), so forward and backward are one program, and
                 the optimizer update a second)
  cpu-inductor-step  the same on PyTorch's CPU backend through inductor; --inductor
  jax-jit        the same model, loss and optimizer written in JAX
                 (benchmarks/jax_models.py), each step one jax.jit program on
                 jaxlib's own XLA CPU backend; --jax
  jax-plugin     the same JAX step on the PJRT plugin that torch_tpu runs
                 on (the same XLA as the tpu sides); --jax

With --fused-optimizer every PyTorch side builds its optimizer with
fused=True (on tpu one program updates all parameters; PyTorch's optimizer
puts a graph break around a fused step, so tpu-compiled and cpu-inductor
then run it eagerly). Each JAX side first trains beside the CPU model and
must match it. Prints
milliseconds per step and each column's ratio to tpu-strict and to cpu, and
with --jax each tpu compiled side's time over each JAX side's. Every step ends with
the loss read on the host and every tpu round with a synchronize, so device work
is inside the time. Sides alternate
round by round and the best round counts, so all see the same machine load.

    python benchmarks/train_step.py --steps 5 --repeats 3 [--inductor] [--jax] [--config small]
                                    [--fused-optimizer]
"""
import argparse
import copy
import dataclasses
import inspect
import pathlib
import sys
import time

import numpy as np
import torch
import torch._dynamo

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import common  # noqa: E402
import mingpt  # noqa: E402
import resnet  # noqa: E402

import torch_tpu  # noqa: E402

EXAMPLES = {"mingpt": mingpt, "resnet": resnet}
# "default": the examples' own configurations, where arithmetic dominates a
# step on a CPU; "small": the parity tests' ones, where per-op dispatch does.
CONFIGS = {
    "default": {"mingpt": mingpt.Config(), "resnet": resnet.Config()},
    "small": {"mingpt": mingpt.Config(block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                      batch_size=4),
              "resnet": resnet.Config(widths=(8, 16, 16, 32), blocks=(1, 1, 1, 1), image_size=16,
                                      batch_size=16)},
}


class CompiledOptimizer:
    """The optimizer step compiled (on the tpu its step counters then live on
    the device, as dynamo arranges for CUDA: see torch_tpu/_capturable.py)."""

    def __init__(self, optimizer, backend):
        self.optimizer = optimizer
        self.step = torch.compile(optimizer.step, backend=backend)

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)


def fused_form(optimizer):
    """The same optimizer, groups and settings with fused=True."""
    accepted = inspect.signature(type(optimizer)).parameters
    settings = {k: v for k, v in optimizer.defaults.items() if k in accepted}
    groups = [{**g, "fused": True, "foreach": None} for g in optimizer.param_groups]
    return type(optimizer)(groups, **{**settings, "fused": True, "foreach": None})


class Side:
    """One way of running the training step."""

    def __init__(self, name, example, cfg, cpu_model, fused_optimizer=False):
        self.name = name
        self.example = example
        self.dev = torch.device("cpu" if name.startswith("cpu") else "tpu")
        self.mode = {"tpu-fused": "fused"}.get(name, "strict")
        self.model = copy.deepcopy(cpu_model).to(self.dev)
        self.optimizer = example.make_optimizer(self.model, cfg)
        if fused_optimizer:
            self.optimizer = fused_form(self.optimizer)
        self.loss_fn = example.loss_fn
        self.step_fn = None
        if name.endswith("-step"):
            self.step_fn = common.compiled_step(self.model, self.optimizer, example.loss_fn, self.dev.type)
        elif name.endswith(("compiled", "inductor")):
            # The forward and its loss as one graph, as the JAX side jits
            # them (its backward is one graph too).
            backend = "tpu" if self.dev.type == "tpu" else "inductor"
            self.loss_fn = torch.compile(example.loss_fn, backend=backend)
            self.optimizer = CompiledOptimizer(self.optimizer, backend)

    def ms_per_step(self, batches):
        with torch_tpu.eager_mode(self.mode):
            start = time.perf_counter()
            common.train(self.model, self.optimizer, self.loss_fn, batches, self.dev, log_every=0,
                         step_fn=self.step_fn)
            if self.dev.type == "tpu":
                torch.tpu.synchronize()
            return (time.perf_counter() - start) / len(batches) * 1e3


def import_jax_models():
    """benchmarks/jax_models.py, or an exit saying how to install JAX."""
    try:
        import jax_models
    except ModuleNotFoundError as e:
        if e.name not in ("jax", "jaxlib"):
            raise
        raise SystemExit("--jax needs JAX: pip install -r benchmarks/requirements-jax.txt") from e
    return jax_models


JAX_SIDES = ("jax-jit", "jax-plugin")


def jax_device(side):
    """jax-jit runs on jaxlib's own CPU backend, jax-plugin on torch_tpu's plugin."""
    jax_models = import_jax_models()
    return {"jax-jit": jax_models.jaxlib_device, "jax-plugin": jax_models.plugin_device}[side]()


class JaxSide:
    """The example's model, loss and optimizer written in JAX, from the CPU
    model's weights."""

    def __init__(self, name, example, cfg, cpu_model):
        self.name = name
        optimizer = example.make_optimizer(cpu_model, cfg)  # read for its hyperparameters only
        self.trainer = import_jax_models().Trainer(example.__name__, cfg, cpu_model, optimizer,
                                                   jax_device(name))

    def placement(self):
        """Where its parameters are, as JAX reports it."""
        param = self.trainer.first_parameter()
        (device,) = param.devices()
        return f"{self.name} on {device} of backend {import_jax_models().backend_of(param)}"

    def ms_per_step(self, batches):
        start = time.perf_counter()
        self.trainer.train(batches)
        return (time.perf_counter() - start) / len(batches) * 1e3


# Both sides train from the same weights on the same batches for
# CHECK_STEPS steps, dropout off. Measured drift of float32 sums in another
# order: 1e-6 on losses, 4.4e-4 on updates (minGPT's qkv biases, where Adam
# divides small gradients); Adam's beta2 at 0.999, weight decay left out,
# BatchNorm's momentum at 0.2 or a norm's eps at 1e-3 each exceed these.
CHECK_STEPS = 3
CHECK_LOSS_RTOL = 1e-4  # on each step's loss
CHECK_UPDATE_RTOL = 5e-3  # on each tensor's change: |jax - torch| / |torch - start|, 2-norms


def check_jax_matches_cpu(example, cfg, cpu_model, batches, side):
    """Exits, naming the first disagreement, unless the JAX model on `side`'s
    device trains as the CPU model does; prints both sides' losses."""
    cfg = dataclasses.replace(cfg, dropout=0.0) if hasattr(cfg, "dropout") else cfg
    torch_model = example.build(cfg)
    torch_model.load_state_dict(cpu_model.state_dict())
    start = {name: t.clone() for name, t in torch_model.state_dict().items()}
    optimizer = example.make_optimizer(torch_model, cfg)
    jax_trainer = import_jax_models().Trainer(example.__name__, cfg, torch_model, optimizer,
                                              jax_device(side))
    jax_losses = jax_trainer.train(batches)
    cpu_losses = common.train(torch_model, optimizer, example.loss_fn, batches, torch.device("cpu"),
                              log_every=0)
    print(f"{example.__name__}: check, {len(batches)} steps, dropout off: losses cpu "
          f"{' '.join(f'{v:.6f}' for v in cpu_losses)}, {side} {' '.join(f'{v:.6f}' for v in jax_losses)}")
    for step, (c, j) in enumerate(zip(cpu_losses, jax_losses), 1):
        if abs(j - c) > CHECK_LOSS_RTOL * abs(c):
            raise SystemExit(f"{example.__name__}: {side}'s model is not the CPU one: step {step} loss "
                             f"{j:.6f} vs {c:.6f} (relative tolerance {CHECK_LOSS_RTOL})")
    jax_state = jax_trainer.state_dict()
    for name, t in torch_model.state_dict().items():
        change = float(np.linalg.norm(t.double().numpy() - start[name].double().numpy()))
        error = float(np.linalg.norm(jax_state[name].astype(np.float64) - t.double().numpy()))
        if error > CHECK_UPDATE_RTOL * change:
            raise SystemExit(f"{example.__name__}: {side}'s model is not the CPU one: after {len(batches)} "
                             f"steps {name} is {error:.3g} from the CPU's, which moved {change:.3g} "
                             f"(relative tolerance {CHECK_UPDATE_RTOL})")


def measure(example, cfg, sides, steps, repeats, warmup, show_placement, fused_optimizer):
    cpu_model = example.build(cfg)
    for side in sides:
        if side in JAX_SIDES:
            check_jax_matches_cpu(example, cfg, cpu_model, example.make_batches(cfg, CHECK_STEPS), side)
    runners = [JaxSide(name, example, cfg, cpu_model) if name in JAX_SIDES
               else Side(name, example, cfg, cpu_model, fused_optimizer) for name in sides]
    if show_placement:
        print("JAX parameters: " + "; ".join(r.placement() for r in runners if isinstance(r, JaxSide)))
    batches = example.make_batches(cfg, warmup + steps * repeats)
    warmup_s = {}
    for r in runners:  # compiles every program each side needs
        start = time.perf_counter()
        r.ms_per_step(batches[:warmup])
        warmup_s[r.name] = time.perf_counter() - start
    best = {r.name: float("inf") for r in runners}
    for k in range(repeats):
        round_batches = batches[warmup + k * steps:warmup + (k + 1) * steps]
        for r in runners:
            best[r.name] = min(best[r.name], r.ms_per_step(round_batches))
    return best, warmup_s


def print_xla_versions(jax_models):
    """Which XLA each side compiles with: jaxlib's own, and the plugin's."""
    jax = jax_models.jax
    tpu = torch.tpu.get_device_properties()
    plugin = jax_models.plugin_device().client
    print(f"jax {jax.__version__} (jaxlib {jax.lib.__version__}), default backend {jax.default_backend()!r} "
          f"(jaxlib's); backend {jax_models.PLUGIN_BACKEND!r}: PJRT C API "
          f"{plugin.pjrt_c_api_major_version}.{plugin.pjrt_c_api_minor_version}; "
          f"tpu plugin: platform {tpu['platform']}, version {tpu['platform_version']}, "
          f"PJRT C API {tpu['pjrt_api_version']}, XLA {tpu['xla_version'] or 'unknown'}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5, help="timed steps per round")
    p.add_argument("--repeats", type=int, default=3, help="rounds; the best counts")
    p.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    p.add_argument("--models", nargs="+", choices=list(EXAMPLES), default=list(EXAMPLES))
    p.add_argument("--inductor", action="store_true", help="also time PyTorch inductor on the CPU")
    p.add_argument("--jax", action="store_true",
                   help="also time the same models in JAX (pip install -r benchmarks/requirements-jax.txt)")
    p.add_argument("--config", choices=list(CONFIGS), default="default")
    p.add_argument("--fused-optimizer", action="store_true",
                   help="build every PyTorch side's optimizer with fused=True")
    args = p.parse_args()
    common.device("tpu")
    sides = (["cpu"] + (["cpu-inductor", "cpu-inductor-step"] if args.inductor else [])
             + ["tpu-strict", "tpu-fused", "tpu-compiled", "tpu-compiled-step"])
    if args.jax:
        sides.extend(JAX_SIDES)
        print_xla_versions(import_jax_models())
    print(f"{'model':8} {'side':17} {'ms/step':>9} {'vs strict':>10} {'vs cpu':>8} {'warm-up s':>10}")
    for name in args.models:
        example, cfg = EXAMPLES[name], CONFIGS[args.config][name]
        torch._dynamo.reset()
        best, warmup_s = measure(example, cfg, sides, args.steps, args.repeats, args.warmup,
                                 show_placement=args.jax and name == args.models[0],
                                 fused_optimizer=args.fused_optimizer)
        for side in sides:
            print(f"{name:8} {side:17} {best[side]:9.1f} {best['tpu-strict'] / best[side]:9.2f}x "
                  f"{best['cpu'] / best[side]:7.2f}x {warmup_s[side]:10.1f}", flush=True)
        if args.jax:
            for side in ("tpu-compiled", "tpu-compiled-step"):
                print(f"{name:8} {side} / jax-jit (jaxlib's XLA): {best[side] / best['jax-jit']:.2f}x, "
                      f"/ jax-plugin (the same plugin): {best[side] / best['jax-plugin']:.2f}x "
                      "(target: at most 1.05x)", flush=True)


if __name__ == "__main__":
    main()
