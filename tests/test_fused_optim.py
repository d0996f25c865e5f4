"""Fused optimizer steps (torch.optim's fused=True: Adam, AdamW, SGD,
Adagrad) on tpu against the same fused optimizers on CPU, step by step, and
their ATen ops (_fused_adam_, _fused_adamw_, _fused_sgd_, _fused_adagrad_)
called directly with a GradScaler's grad_scale and found_inf. Each step is
one program for the update (and one for the step counters), and a changing
learning rate or momentum never recompiles."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, programs_run  # noqa: E402
from test_optim import SCHEDULERS, train_and_compare  # noqa: E402

import torch_tpu  # noqa: E402
import torch_tpu.metrics  # noqa: E402

OPTIMIZERS = {
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam-amsgrad-decay": (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    "adam-maximize-betas": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, maximize=True)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01)),
    "adamw-amsgrad": (torch.optim.AdamW, dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    "sgd": (torch.optim.SGD, dict(lr=0.1)),
    "sgd-momentum-decay": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01)),
    "sgd-nesterov-maximize": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    "adagrad": (torch.optim.Adagrad, dict(lr=0.1)),
    "adagrad-decays": (torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, eps=1e-6)),
}


def fused(name, **extra):
    cls, config = OPTIMIZERS[name]
    return lambda params: cls(params, fused=True, **{**config, **extra})


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_fused_optimizer_matches_cpu_fused(name):
    """float32 and bfloat16 parameters, 0-d and 1-element ones, 10 steps."""
    train_and_compare(fused(name))


@pytest.mark.parametrize("name", ["adam", "adamw-amsgrad", "sgd-momentum-decay", "adagrad"])
def test_tensor_lr(name):
    train_and_compare(fused(name, lr=torch.tensor(0.01)))


@pytest.mark.parametrize("name", ["onecycle", "cosine"])
def test_scheduled_lr_and_momentum(name):
    """OneCycleLR also cycles SGD's momentum and Adam's beta1."""
    for opt in ["sgd-momentum-decay", "adamw"]:
        lrs = train_and_compare(fused(opt), make_sched=SCHEDULERS[name])
        assert len(set(lrs)) > 1, "the schedule never changed the lr"


def step_counts(make_opt, n, steps):
    """Programs run by each of `steps` steps over n parameters, and the
    compiles after the first two (SGD's first step is a program of its own)."""
    params = [torch.randn(2, 3, device="tpu", requires_grad=True) for _ in range(n)]
    opt = make_opt(params)
    cycles_momentum = "momentum" in opt.defaults or "betas" in opt.defaults  # Adagrad has neither
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=steps + 2,
                                                cycle_momentum=cycles_momentum)
    for p in params:
        p.grad = torch.ones_like(p)
    for _ in range(2):
        opt.step()
        sched.step()
        torch.tpu.synchronize()  # fused eager mode: each step a graph of its own
    compiles = torch_tpu.metrics.counters()["compile"]
    programs = []
    for _ in range(steps):
        programs.append(programs_run(opt.step))
        sched.step()
    return programs, torch_tpu.metrics.counters()["compile"] - compiles


@pytest.mark.parametrize("name", ["adamw", "sgd-momentum-decay", "adagrad"])
def test_one_program_per_step_and_no_recompiles(name):
    """The step counters' increment and the update: two programs a step for
    any number of parameters (SGD keeps no counters: one; fused eager mode
    runs the step as one), while OneCycleLR changes the lr (and momentum)
    every step without a compile."""
    expected = 1 if name.startswith("sgd") or torch_tpu.get_eager_mode() == "fused" else 2
    for n in [3, 40]:
        programs, compiles = step_counts(fused(name), n, steps=4)
        assert programs == [expected] * 4, f"{n} parameters"
        assert compiles == 0, f"{n} parameters: {compiles} compiles while the schedule ran"


# ---- the ops themselves ----

def adam_lists(dtype, amsgrad, seed=0):
    """params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps
    for parameters of several shapes (0-d and empty among them)."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(5, 3), (), (0,), (7,)]

    def each(scale=1.0, positive=False):
        xs = [torch.randn(s, generator=g) * scale for s in shapes]
        return [(x.abs() if positive else x).to(dtype) for x in xs]

    steps = [torch.tensor(float(s)) for s in (1, 3, 7, 20)]
    return [each(), each(4.0), each(0.1), each(0.01, positive=True),
            each(0.02, positive=True) if amsgrad else [], steps]


def run_both(op, lists, **kwargs):
    """op on CPU and tpu copies of `lists` (and any tensor kwargs); returns
    both sides' lists after the call."""
    cpu = [[t.clone() for t in lst] for lst in lists]
    tpu = [[t.to("tpu") for t in lst] for lst in lists]
    tpu_kwargs = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    op(*cpu, **kwargs)
    op(*tpu, **tpu_kwargs)
    return cpu, tpu


def assert_lists_close(tpu, cpu, what):
    for i, (t_list, c_list) in enumerate(zip(tpu, cpu)):
        for k, (t, c) in enumerate(zip(t_list, c_list)):
            tol = {torch.float32: (2e-6, 1e-6), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
            try:
                assert_close(t, c, *tol[c.dtype])
            except AssertionError as e:
                raise AssertionError(f"{what}: list {i} item {k}: {e}") from None


ADAM_HYPER = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", [torch._fused_adam_, torch._fused_adamw_])
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, True)])
@pytest.mark.parametrize("found_inf", [None, 0.0, 1.0])
def test_fused_adam_op_with_grad_scale(op, dtype, amsgrad, maximize, found_inf):
    """With grad_scale the grads are unscaled in place; found_inf 1 leaves
    every tensor as it was (GradScaler's skipped step)."""
    extra = dict(grad_scale=torch.tensor(4.0))
    if found_inf is not None:
        extra["found_inf"] = torch.tensor(found_inf)
    cpu, tpu = run_both(op, adam_lists(dtype, amsgrad), amsgrad=amsgrad, maximize=maximize, **ADAM_HYPER, **extra)
    assert_lists_close(tpu, cpu, op.__name__)
    if found_inf == 1.0:
        assert_lists_close(tpu, adam_lists(dtype, amsgrad), "skipped step")


def test_fused_adam_op_without_grad_scale_leaves_grads():
    lists = adam_lists(torch.float32, amsgrad=False)
    cpu, tpu = run_both(torch._fused_adamw_, lists, amsgrad=False, maximize=False, **ADAM_HYPER)
    assert_lists_close(tpu, cpu, "_fused_adamw_")
    for t, original in zip(tpu[1], lists[1]):
        assert torch.equal(t.cpu(), original)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("momentum,first", [(0.0, False), (0.9, True), (0.9, False)])
@pytest.mark.parametrize("found_inf", [None, 1.0])
def test_fused_sgd_op(dtype, momentum, first, found_inf):
    params, grads, bufs = adam_lists(dtype, amsgrad=False)[:3]
    extra = dict(grad_scale=torch.tensor([0.5]))  # one element, as 0-d in the Adam test
    if found_inf is not None:
        extra["found_inf"] = torch.tensor([found_inf])
    cpu, tpu = run_both(torch._fused_sgd_, [params, grads, bufs if momentum else []], weight_decay=0.01,
                        momentum=momentum, lr=0.1, dampening=0.1, nesterov=True, maximize=False,
                        is_first_step=first, **extra)
    assert_lists_close(tpu, cpu, "_fused_sgd_")


def test_fused_adagrad_op_tensor_lr():
    params, grads, sums = adam_lists(torch.float32, amsgrad=False)[:3]
    sums = [s.abs() for s in sums]
    steps = adam_lists(torch.float32, amsgrad=False)[5]
    cpu, tpu = run_both(torch._fused_adagrad_, [params, grads, sums, steps], lr=torch.tensor(0.1),
                        lr_decay=0.01, weight_decay=0.0, eps=1e-10, maximize=True)
    assert_lists_close(tpu, cpu, "_fused_adagrad_")


def test_bad_lists_name_the_op_and_the_shapes():
    params, grads, exp_avgs, exp_avg_sqs, _, steps = [[t.to("tpu") for t in lst]
                                                     for lst in adam_lists(torch.float32, False)]
    with pytest.raises(RuntimeError, match=r"aten::_fused_adamw_\(\[4 tensors: Float\[5, 3\], \.\.\.\], \[3 tensors: .*0\.9, 0\.999.*\): grads has 3 tensors but self has 4"):
        torch._fused_adamw_(params, grads[:3], exp_avgs, exp_avg_sqs, [], steps, amsgrad=False,
                            maximize=False, **ADAM_HYPER)
    with pytest.raises(RuntimeError, match=r"exp_avgs\[0\] has shape \[3, 5\].*self\[0\] has shape \[5, 3\]"):
        torch._fused_adamw_(params, grads, [exp_avgs[0].t().contiguous()] + exp_avgs[1:], exp_avg_sqs, [],
                            steps, amsgrad=False, maximize=False, **ADAM_HYPER)
    with pytest.raises(RuntimeError, match=r"aten::_fused_adamw_\(.*\): amsgrad=True needs max_exp_avg_sqs"):
        torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=True, maximize=False,
                            **ADAM_HYPER)
    # The device still works, and the good call updates.
    before = params[0].cpu()
    torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, maximize=False,
                        **ADAM_HYPER)
    assert not torch.equal(params[0].cpu(), before)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_only_parameters_and_moments_are_written(mode):
    """A step writes each parameter and its two moments in place (storages
    of 1 MiB and more are), and leaves the gradients alone: three in-place
    writes a parameter a step, in either eager mode."""
    params = [torch.nn.Parameter(torch.randn(512, 512, device="tpu")) for _ in range(2)]
    for p in params:
        p.grad = torch.randn(512, 512, device="tpu")
    grads = [p.grad.cpu() for p in params]
    opt = torch.optim.AdamW(params, lr=1e-3, fused=True)
    with torch_tpu.eager_mode(mode):
        for _ in range(2):  # the first step makes the moments
            opt.step()
            torch.tpu.synchronize()
        before = torch_tpu.metrics.counters()["in_place_write"]
        opt.step()
        torch.tpu.synchronize()
    assert torch_tpu.metrics.counters()["in_place_write"] - before == 3 * len(params)
    for p, g in zip(params, grads):
        assert torch.equal(p.grad.cpu(), g)



def test_functional_form():
    """aten::_fused_adamw (what functionalization makes of the in-place op)
    returns the updated lists and leaves its arguments alone."""
    lists = adam_lists(torch.float32, amsgrad=False)
    expected = [[t.clone() for t in lst] for lst in lists]
    torch._fused_adamw_(*expected, amsgrad=False, maximize=False, **ADAM_HYPER)
    tpu = [[t.to("tpu") for t in lst] for lst in lists]
    results = torch.ops.aten._fused_adamw(*tpu, amsgrad=False, maximize=False, **ADAM_HYPER)
    assert_lists_close(results, expected[:5], "_fused_adamw")
    assert_lists_close(tpu, lists, "the arguments")
