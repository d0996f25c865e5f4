"""Every example model trained through torch.compile(backend="tpu"): the
model's forward and backward graphs and the optimizer step compiled, 20
steps from the same weights and batches as PyTorch's CPU backend, within
the eager parity tolerances of test_examples.py (eager tpu meets the same
bounds there, so compiled, eager and CPU agree). Nothing may fall back to
the CPU, later steps compile nothing, and dynamo breaks the graphs exactly
where it does for CPU tensors (graph breaks are dynamo's, before any
backend: aot_eager on the CPU breaks where inductor does). Then each trains
again as one compiled step function (examples/common.py's compiled_step)."""
import copy

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters as dynamo_counters

import torch_tpu
from test_examples import GRAD_TOL, LOSS_RTOL, MODELS, STEPS, common


class CompiledOptimizer:
    """An optimizer whose step runs as a compiled graph."""

    def __init__(self, optimizer, backend):
        self.optimizer = optimizer
        self.step = torch.compile(optimizer.step, backend=backend)

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)


def train(example, cfg, model, batches, dev, compiled=None, backend="tpu"):
    """common.train eager (compiled None), with model and optimizer step
    compiled apart ("apart") or the whole step as one function ("step");
    returns the losses, the gradients of step 1 and the counters at step 3."""
    grads, counted = {}, {}
    params = dict(model.named_parameters())

    def once_grads_exist(step, _):
        if step == 1:
            grads.update({n: p.grad.detach().cpu().clone() for n, p in params.items()})
        if step == 3:
            counted.update(torch_tpu.metrics.counters())

    optimizer = example.make_optimizer(model, cfg)
    step_fn = None
    if compiled == "apart":
        model, optimizer = torch.compile(model, backend=backend), CompiledOptimizer(optimizer, backend)
    elif compiled == "step":
        step_fn = common.compiled_step(model, optimizer, example.loss_fn, dev.type)
    losses = common.train(model, optimizer, example.loss_fn, batches, dev, log_every=0,
                          callback=once_grads_exist, step_fn=step_fn)
    return losses, grads, counted


def assert_trained_like_cpu(name, tpu, cpu, tpu_model, cpu_model, compiles_by_step_3):
    """`tpu` and `cpu` are (losses, first gradients) of the same training:
    within the eager tolerances, the same buffers after it, nothing on the
    CPU fallback and nothing compiled after the third step."""
    (tpu_losses, tpu_grads), (cpu_losses, cpu_grads) = tpu, cpu
    for step, (t, c) in enumerate(zip(tpu_losses, cpu_losses), 1):
        assert abs(t - c) <= LOSS_RTOL * abs(c), f"step {step}: compiled tpu loss {t} vs cpu {c}"
    rtol, atol = GRAD_TOL[name]
    for n in cpu_grads:
        torch.testing.assert_close(tpu_grads[n], cpu_grads[n], rtol=rtol, atol=atol,
                                   msg=lambda m: f"gradient of {n} after step 1: {m}")
    for t, c in zip(tpu_model.buffers(), cpu_model.buffers()):
        torch.testing.assert_close(t.cpu(), c, rtol=LOSS_RTOL, atol=1e-4)
    counters = torch_tpu.metrics.counters()
    assert counters["cpu_fallback"] == 0, f"ops run on the CPU: {counters['cpu_fallback_ops']}"
    assert counters["compile"] == compiles_by_step_3, (
        f"steps after the third compiled again ({counters['program_unload']} programs unloaded): "
        f"{torch_tpu.metrics.recompile_reasons()[-5:]}")


@pytest.mark.parametrize("name", MODELS)
def test_compiled_training_matches_cpu(name):
    torch._dynamo.reset()
    example, cfg = MODELS[name]
    cpu_model = example.build(cfg, seed=0)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    batches = example.make_batches(cfg, STEPS, seed=0)
    torch_tpu.metrics.reset()
    dynamo_counters.clear()

    tpu_losses, tpu_grads, counted = train(example, cfg, tpu_model, batches, torch.device("tpu"), "apart")
    tpu_breaks = dict(dynamo_counters["graph_break"])
    cpu_losses, cpu_grads, _ = train(example, cfg, cpu_model, batches, torch.device("cpu"))

    assert_trained_like_cpu(name, (tpu_losses, tpu_grads), (cpu_losses, cpu_grads), tpu_model, cpu_model,
                            counted["compile"])

    torch._dynamo.reset()
    dynamo_counters.clear()
    train(example, cfg, copy.deepcopy(cpu_model), batches[:2], torch.device("cpu"), "apart", "aot_eager")
    assert tpu_breaks == dict(dynamo_counters["graph_break"]), "graph breaks differ from the CPU's"
    torch._dynamo.reset()


@pytest.mark.parametrize("name", MODELS)
def test_compiled_train_step_matches_cpu(name):
    """The whole step as one compiled function (common.compiled_step, dynamo
    tracing loss.backward()): the same losses, first gradients and buffers as
    eager CPU training, and two programs a step once warm (forward with
    backward, then torch.optim's update, which breaks the graph)."""
    torch._dynamo.reset()
    example, cfg = MODELS[name]
    cpu_model = example.build(cfg, seed=0)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    batches = example.make_batches(cfg, STEPS, seed=0)
    torch_tpu.metrics.reset()
    tpu_losses, tpu_grads, counted = train(example, cfg, tpu_model, batches, torch.device("tpu"), "step")
    cpu_losses, cpu_grads, _ = train(example, cfg, cpu_model, batches, torch.device("cpu"))

    assert_trained_like_cpu(name, (tpu_losses, tpu_grads), (cpu_losses, cpu_grads), tpu_model, cpu_model,
                            counted["compile"])
    counters = torch_tpu.metrics.counters()
    warm_steps = STEPS - 3
    assert counters["execute"] - counted["execute"] == 2 * warm_steps, (
        f"{(counters['execute'] - counted['execute']) / warm_steps} programs a step, not 2")
    torch._dynamo.reset()
