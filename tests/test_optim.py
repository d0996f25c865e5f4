"""torch.optim, learning-rate schedulers and clip_grad_norm_ on tpu against
CPU, step by step; and the _foreach_ ops they use, each one program per
call. A small model (two linear layers, a 0-d and a 1-element parameter, a
bfloat16 one) trains 10 steps on each device from the same weights and
batches; parameters and optimizer state must agree after every step."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, programs_run  # noqa: E402

import torch_tpu.metrics  # noqa: E402

STEPS = 10
# Differences of a few float32 ulps per step may grow through 10 steps of an
# adaptive optimizer; bfloat16 parameters may land one rounding step apart.
TOL = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (1.6e-2, 1e-2)}


def initial_params():
    g = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (7,), (3, 7), (3,), (), (1,)]
    params = [torch.randn(s, generator=g) * 0.5 for s in shapes]
    params[4] = torch.tensor(1.5)
    params.append(torch.randn(3, generator=g).to(torch.bfloat16))
    return params


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 5, generator=g), torch.randn(4, 3, generator=g)) for _ in range(STEPS)]


def loss_of(params, x, y):
    w1, b1, w2, b2, scale, shift, bf = params
    h = (x @ w1.t() + b1).clamp(min=0)  # ReLU
    out = (h @ w2.t() + b2) * scale + shift
    # The bfloat16 parameter has a loss term of its own: a one-rounding-step
    # difference in it would otherwise shift every float32 gradient.
    return ((out - y) ** 2).mean() + ((bf.float() - y[0]) ** 2).mean()


class Run:
    """One training run on one device."""

    def __init__(self, device, make_opt, make_sched=None, clip=None):
        self.device = device
        self.params = [p.clone().to(device).requires_grad_() for p in initial_params()]
        self.opt = make_opt(self.params)
        self.sched = make_sched(self.opt) if make_sched else None
        self.clip = clip

    def step(self, x, y):
        """One step; returns (total grad norm or None, lr after the step)."""
        self.opt.zero_grad()
        loss_of(self.params, x.to(self.device), y.to(self.device)).backward()
        # Clips the float32 parameters: a bfloat16 gradient's norm is only
        # bfloat16-precise, and so would be the total.
        norm = torch.nn.utils.clip_grad_norm_(self.params[:-1], **self.clip) if self.clip else None
        self.opt.step()
        if self.sched:
            self.sched.step()
        lr = self.opt.param_groups[0]["lr"]
        return norm, float(lr)


def assert_param_close(actual, expected, what):
    r, a = TOL[expected.dtype]
    try:
        assert_close(actual, expected, r, a)
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None


def train_and_compare(make_opt, make_cpu_opt=None, make_sched=None, clip=None):
    """Trains on CPU and tpu in lockstep and compares after every step. With
    foreach unset, tpu takes the foreach path and CPU the single-tensor one:
    PyTorch's defaults for each device."""
    cpu = Run("cpu", make_cpu_opt or make_opt, make_sched, clip)
    tpu = Run("tpu", make_opt, make_sched, clip)
    lrs = []
    for step, (x, y) in enumerate(batches()):
        cpu_norm, cpu_lr = cpu.step(x, y)
        tpu_norm, tpu_lr = tpu.step(x, y)
        assert tpu_lr == pytest.approx(cpu_lr, rel=1e-12), f"step {step}: lr"
        lrs.append(tpu_lr)
        if clip:
            assert_close(tpu_norm, cpu_norm, 1e-4, 1e-6)
        for i, (c, t) in enumerate(zip(cpu.params, tpu.params)):
            assert t.device.type == "tpu"
            assert_param_close(t.detach(), c.detach(), f"step {step}: param {i}")
            for key, value in cpu.opt.state[c].items():
                got = tpu.opt.state[t][key]
                if key in ("step", "mu_product"):  # CPU numbers unless capturable (NAdam keeps both)
                    assert float(got) == float(value)
                    continue
                assert got.device.type == "tpu", f"state {key} is on {got.device}"
                assert_param_close(got, value, f"step {step}: param {i} state {key}")
    return lrs


# ---- optimizers ----

SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
    dict(lr=0.01, momentum=0.5, maximize=True),
]


@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("config", SGD_CONFIGS)
def test_sgd(config, foreach):
    train_and_compare(lambda p: torch.optim.SGD(p, foreach=foreach, **config))


ADAM_CONFIGS = [
    dict(),
    dict(amsgrad=True),
    dict(weight_decay=0.1),
    dict(weight_decay=0.1, amsgrad=True, maximize=True),
    dict(betas=(0.8, 0.9), eps=1e-6, lr=0.01),
]


@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("config", ADAM_CONFIGS)
@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW])
def test_adam(cls, config, foreach):
    train_and_compare(lambda p: cls(p, foreach=foreach, **config))


OTHER_OPTIMIZERS = {
    "adadelta": lambda p: torch.optim.Adadelta(p, weight_decay=0.01),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01),
    "adamax": lambda p: torch.optim.Adamax(p, lr=0.01),
    "asgd": lambda p: torch.optim.ASGD(p, lr=0.01),
    "nadam": lambda p: torch.optim.NAdam(p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
    "radam": lambda p: torch.optim.RAdam(p, lr=0.01),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
    "rprop": lambda p: torch.optim.Rprop(p, lr=0.01),
}


@pytest.mark.parametrize("name", sorted(OTHER_OPTIMIZERS))
def test_other_optimizers(name):
    """The rest of torch.optim, in their default (foreach) path on tpu."""
    train_and_compare(OTHER_OPTIMIZERS[name])


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs(line_search):
    """LBFGS steps with a closure (its loop reads losses and directions on the host)."""
    results = []
    for device in ["cpu", "tpu"]:
        g = torch.Generator().manual_seed(0)
        w = torch.randn(5, 3, generator=g).to(device).requires_grad_()
        x, y = torch.randn(20, 5, generator=g).to(device), torch.randn(20, 3, generator=g).to(device)
        opt = torch.optim.LBFGS([w], lr=0.5, max_iter=10, line_search_fn=line_search)

        def closure():
            opt.zero_grad()
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        results.append(w.detach())
    if line_search:
        # The strong-Wolfe search branches on comparisons of losses, so a
        # different summation order in the loss's mean (as exact, not the
        # same) moved w by up to 0.4% after 3 steps (fused mode).
        assert_close(results[1], results[0], rtol=1e-2, atol=1e-3)
    else:
        assert_param_close(results[1], results[0], "w after 3 steps")


@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_tensor_lr(cls):
    """lr as a 0-d tensor: SGD's foreach path takes it as is; Adam's foreach
    path wants capturable=True (steps on the device, no host syncs), which
    the CPU cannot run, so CPU uses the single-tensor path there."""
    extra = dict(momentum=0.9) if cls is torch.optim.SGD else dict(capturable=True, amsgrad=True)
    cpu_extra = dict(momentum=0.9) if cls is torch.optim.SGD else dict(amsgrad=True)
    train_and_compare(lambda p: cls(p, lr=torch.tensor(0.01), **extra),
                      lambda p: cls(p, lr=torch.tensor(0.01), foreach=False, **cpu_extra))


def test_capturable_adam_state_on_device():
    run = Run("tpu", lambda p: torch.optim.Adam(p, capturable=True))
    x, y = batches()[0]
    run.step(x, y)
    run.step(x, y)
    step = run.opt.state[run.params[0]]["step"]
    assert step.device.type == "tpu" and float(step) == 2.0


def test_foreach_is_the_default_on_tpu():
    from torch.optim.optimizer import _default_to_fused_or_foreach
    params = [torch.zeros(2, device="tpu", requires_grad=True)]
    assert _default_to_fused_or_foreach(params, differentiable=False, use_fused=False) == (False, True)


# ---- schedulers ----

SCHEDULERS = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=STEPS),
    "lambda": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / (1 + s)),
    "onecycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=STEPS + 1),
}


@pytest.mark.parametrize("tensor_lr", [False, True])
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler(name, tensor_lr):
    def make_opt(params):  # a tensor lr each: schedulers write it in place
        return torch.optim.SGD(params, lr=torch.tensor(0.05) if tensor_lr else 0.05, momentum=0.9)

    lrs = train_and_compare(make_opt, make_sched=SCHEDULERS[name])
    assert len(set(lrs)) > 1, "the schedule never changed the lr"


@pytest.mark.parametrize("name", ["cosine", "onecycle"])
def test_scheduler_adamw(name):
    lrs = train_and_compare(lambda p: torch.optim.AdamW(p, lr=0.01), make_sched=SCHEDULERS[name])
    assert len(set(lrs)) > 1


# ---- clip_grad_norm_ ----

@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.05, 100.0])
def test_clip_grad_norm(max_norm, norm_type, foreach):
    clip = dict(max_norm=max_norm, norm_type=norm_type, foreach=foreach)
    train_and_compare(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=foreach), clip=clip)


def test_clip_grad_norm_returns_total_norm():
    grads = [torch.tensor([3.0, 0.0]), torch.tensor([[4.0]], dtype=torch.bfloat16), torch.tensor(-12.0)]
    for norm_type, total in [(2.0, 13.0), (math.inf, 12.0)]:
        params = [torch.zeros_like(g, device="tpu", requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g.to("tpu")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=1.0, norm_type=norm_type)
        assert norm.device.type == "tpu" and float(norm) == pytest.approx(total)
        for p, g in zip(params, grads):
            assert_close(p.grad, g * (1.0 / (total + 1e-6)))


# ---- the _foreach_ ops themselves ----

def tensors(dtype, seed, positive=False, one_element=False):
    """Items of several layouts: 2-d, 0-d, a transposed (strided) view. With
    one_element, items of one element each, as an optimizer's step counters
    are: 0-d, [1], [1, 1] and a view at an offset into a larger storage."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(), (1,), (1, 1), (5,)] if one_element else [(3, 4), (), (2, 3)]
    out = [torch.randn(shape, generator=g, dtype=torch.float64) for shape in shapes]
    out = [(x.abs() + 0.5 if positive else x).to(dtype) for x in out]
    out[-1] = out[-1][3:4] if one_element else out[-1].t()
    return out


def is_tensor_list(x):
    return isinstance(x, list) and isinstance(x[0], torch.Tensor)


def check_foreach(fn, *args, **kwargs):
    """fn on CPU and on tpu copies of its tensor lists; compares the results
    (functional ops) and every list afterwards (in-place ops)."""
    cpu_args = [[t.clone() for t in x] if is_tensor_list(x) else x for x in args]
    tpu_args = [[t.to("tpu") for t in x] if is_tensor_list(x) else x for x in args]
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **kwargs)
    if expected is not None:
        assert_close(list(actual), list(expected))
    for c, t in zip(cpu_args, tpu_args):
        if is_tensor_list(c):
            assert_close(t, c)


# Each overload kind (List, Scalar, ScalarList, Tensor, alpha; in-place and
# functional) on several ops. a, b: any values; p: positive; s: one Python
# number per item, from 0.1 to 0.9 (lerp weights on both sides of 0.5).
CASES = {
    "add_.List.alpha": lambda a, b, p, s: (torch._foreach_add_, a, b, {"alpha": -0.25}),
    "add_.Scalar": lambda a, b, p, s: (torch._foreach_add_, a, 1.5, {}),
    "add_.ScalarList": lambda a, b, p, s: (torch._foreach_add_, a, s, {}),
    "add_.Tensor.cpu": lambda a, b, p, s: (torch._foreach_add_, a, torch.tensor(0.75), {}),
    "add.List": lambda a, b, p, s: (torch._foreach_add, a, b, {}),
    "sub_.List.alpha": lambda a, b, p, s: (torch._foreach_sub_, a, b, {"alpha": 2}),
    "sub.Scalar": lambda a, b, p, s: (torch._foreach_sub, a, 0.5, {}),
    "mul_.ScalarList": lambda a, b, p, s: (torch._foreach_mul_, a, s, {}),
    "mul_.Tensor": lambda a, b, p, s: (torch._foreach_mul_, a, torch.tensor(-1.25), {}),
    "mul.List": lambda a, b, p, s: (torch._foreach_mul, a, b, {}),
    "div_.List": lambda a, b, p, s: (torch._foreach_div_, a, p, {}),
    "div.ScalarList": lambda a, b, p, s: (torch._foreach_div, a, s, {}),
    "div.Tensor": lambda a, b, p, s: (torch._foreach_div, a, torch.tensor(3.0), {}),
    "maximum_.List": lambda a, b, p, s: (torch._foreach_maximum_, a, b, {}),
    "minimum.Scalar": lambda a, b, p, s: (torch._foreach_minimum, a, 0.2, {}),
    "clamp_max_.ScalarList": lambda a, b, p, s: (torch._foreach_clamp_max_, a, s, {}),
    "clamp_min.Scalar": lambda a, b, p, s: (torch._foreach_clamp_min, a, -0.3, {}),
    "pow_.Scalar": lambda a, b, p, s: (torch._foreach_pow_, p, 2.5, {}),
    "pow.List": lambda a, b, p, s: (torch._foreach_pow, p, b, {}),
    "pow.ScalarAndTensor": lambda a, b, p, s: (torch._foreach_pow, 0.9, b, {}),
    "addcmul_.Scalar": lambda a, b, p, s: (torch._foreach_addcmul_, a, b, p, {}),
    "addcmul.ScalarList": lambda a, b, p, s: (torch._foreach_addcmul, a, b, p, s),
    "addcdiv_.ScalarList": lambda a, b, p, s: (torch._foreach_addcdiv_, a, b, p, s),
    "addcdiv_.Tensor": lambda a, b, p, s: (torch._foreach_addcdiv_, a, b, p, torch.tensor(s)),
    "addcdiv.Scalar": lambda a, b, p, s: (torch._foreach_addcdiv, a, b, p, {"value": -0.3}),
    "lerp_.Scalar": lambda a, b, p, s: (torch._foreach_lerp_, a, b, 0.3, {}),
    "lerp_.ScalarList": lambda a, b, p, s: (torch._foreach_lerp_, a, b, s, {}),
    "lerp.List": lambda a, b, p, s: (torch._foreach_lerp, a, b, [x.clamp(max=1) for x in p], {}),
    "neg_": lambda a, b, p, s: (torch._foreach_neg_, a, {}),
    "abs_": lambda a, b, p, s: (torch._foreach_abs_, a, {}),
    "sign": lambda a, b, p, s: (torch._foreach_sign, a, {}),
    "exp_": lambda a, b, p, s: (torch._foreach_exp_, a, {}),
    "sqrt_": lambda a, b, p, s: (torch._foreach_sqrt_, p, {}),
    "sqrt": lambda a, b, p, s: (torch._foreach_sqrt, p, {}),
    "reciprocal_": lambda a, b, p, s: (torch._foreach_reciprocal_, p, {}),
    "zero_": lambda a, b, p, s: (torch._foreach_zero_, a, {}),
    "copy_": lambda a, b, p, s: (torch._foreach_copy_, a, b, {}),
}
# Other dtypes run the cases that read each kind of argument differently.
LOW_PRECISION_CASES = ["add_.List.alpha", "mul_.ScalarList", "div.Tensor", "maximum_.List",
                       "addcdiv_.ScalarList", "addcmul_.Scalar", "lerp_.ScalarList", "sqrt"]
FOREACH_CASES = ([(name, torch.float32) for name in CASES]
                 + [(name, torch.bfloat16) for name in LOW_PRECISION_CASES]
                 + [(name, d) for name in LOW_PRECISION_CASES[:3] for d in (torch.float16, torch.float64)])


def check_case(name, dtype, one_element=False):
    a, b, p = (tensors(dtype, seed, positive=seed == 3, one_element=one_element) for seed in (1, 2, 3))
    s = [0.1 + 0.8 * i / (len(a) - 1) for i in range(len(a))]
    fn, *args, kwargs = CASES[name](a, b, p, s)
    if not isinstance(kwargs, dict):  # a trailing positional argument
        args, kwargs = args + [kwargs], {}
    check_foreach(fn, *args, **kwargs)


@pytest.mark.parametrize("name,dtype", FOREACH_CASES)
def test_foreach_op(name, dtype):
    check_case(name, dtype)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_foreach_op_on_one_element_items(name, dtype):
    check_case(name, dtype, one_element=True)


def test_foreach_one_element_items_of_mixed_dtypes():
    mixed = [torch.tensor(1.5), torch.tensor([2.5], dtype=torch.float64), torch.tensor(-0.5)]
    check_foreach(torch._foreach_mul_, mixed, 1.5)
    check_foreach(torch._foreach_add, mixed, [torch.tensor(0.25), torch.tensor([1.0]), torch.tensor(2.0)])
    steps = [torch.tensor(float(k)) for k in range(1, 5)]
    check_foreach(torch._foreach_pow, 0.9, steps)


def test_foreach_tensor_scalar_on_tpu():
    cpu = tensors(torch.float32, 1)
    tpu = [t.to("tpu") for t in cpu]
    torch._foreach_add_(cpu, torch.tensor(2.0), alpha=3)
    torch._foreach_add_(tpu, torch.tensor(2.0, device="tpu"), alpha=3)
    assert_close(tpu, cpu)
    assert_close(list(torch._foreach_mul(tpu, torch.tensor(0.5, device="tpu"))),
                 list(torch._foreach_mul(cpu, torch.tensor(0.5))))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_foreach_integer(dtype):
    a = [torch.arange(6, dtype=dtype).reshape(2, 3) - 2, torch.tensor(7, dtype=dtype)]
    b = [torch.full((2, 3), 3, dtype=dtype), torch.tensor(-2, dtype=dtype)]
    check_foreach(torch._foreach_add_, a, b, alpha=2)
    check_foreach(torch._foreach_mul, a, 3)
    check_foreach(torch._foreach_div, a, b)  # true division: float results
    check_foreach(torch._foreach_add, a, 0.5)  # promotes to float
    check_foreach(torch._foreach_abs_, a)
    check_foreach(torch._foreach_maximum, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0, 3.0])
def test_foreach_norm(dtype, ord):
    a = tensors(dtype, 1)
    a[0][1, 2] = 0
    check_foreach(torch._foreach_norm, a, ord)
    if dtype == torch.bfloat16:
        check_foreach(torch._foreach_norm, a, ord, dtype=torch.float32)


def test_foreach_nan_propagates():
    a = [torch.tensor([1.0, float("nan"), -3.0]), torch.tensor([float("nan")])]
    b = [torch.tensor([float("nan"), 0.0, 4.0]), torch.tensor([1.0])]
    check_foreach(torch._foreach_maximum, a, b)
    check_foreach(torch._foreach_clamp_max, a, 0.5)
    check_foreach(torch._foreach_norm, a, math.inf)
    check_foreach(torch._foreach_norm, a, 2)


def test_foreach_mixed_dtypes():
    dst = [torch.zeros(3), torch.zeros(2, 2, dtype=torch.bfloat16), torch.zeros((), dtype=torch.int32)]
    src = [torch.randn(3, dtype=torch.float64), torch.randn(2, 2), torch.tensor(5.7)]
    check_foreach(torch._foreach_copy_, dst, src)
    mixed = [torch.randn(3), torch.randn(2, dtype=torch.bfloat16), torch.randn(4, dtype=torch.float64)]
    check_foreach(torch._foreach_mul_, mixed, 1.5)
    check_foreach(torch._foreach_norm, mixed, 2)


def test_foreach_list_operands_broadcast_and_alias():
    a = [torch.randn(3, 4), torch.randn(2)]
    b = [torch.randn(4), torch.randn(())]
    check_foreach(torch._foreach_add_, a, b, alpha=2.0)
    check_foreach(torch._foreach_mul, a, b)
    cpu, tpu = [t.clone() for t in a], [t.to("tpu") for t in a]
    for lists in (cpu, tpu):  # every operand is the list being written
        torch._foreach_addcmul_(lists, lists, lists, 0.5)
    assert_close(tpu, cpu)


# ---- one program per call, no recompiles for new scalar values ----

def test_foreach_add_is_one_program():
    n = 12
    xs = [torch.randn(i + 1, 3, device="tpu") for i in range(n)]
    ys = [torch.randn(i + 1, 3, device="tpu") for i in range(n)]
    for call in [lambda: torch._foreach_add_(xs, ys, alpha=0.5),
                 lambda: torch._foreach_add_(xs, 1.5),
                 lambda: torch._foreach_add_(xs, [float(i) for i in range(n)]),
                 lambda: torch._foreach_addcdiv_(xs, ys, ys, [0.1] * n),
                 lambda: torch._foreach_norm(xs)]:
        kept = call()  # compile (kept: fused mode drops results nobody holds)
        torch_tpu.sync()
        assert programs_run(call) == 1, kept


def test_new_scalar_values_do_not_recompile():
    xs = [torch.randn(4, device="tpu"), torch.randn(2, 2, device="tpu")]
    torch._foreach_addcdiv_(xs, xs, [x.abs() + 1 for x in xs], [0.1, 0.2])
    torch._foreach_mul_(xs, 0.9)
    compiles = torch_tpu.metrics.counters()["compile"]
    for step in range(3):
        torch._foreach_addcdiv_(xs, xs, [x.abs() + 1 for x in xs], [0.3 + step, -0.2 * step])
        torch._foreach_mul_(xs, 0.5 + step)
    assert torch_tpu.metrics.counters()["compile"] == compiles


def programs_per_step(n, make_opt):
    """Programs run by the second step of `make_opt` over n parameters."""
    params = [torch.randn(2, 3, device="tpu", requires_grad=True) for _ in range(n)]
    opt = make_opt(params, lr=0.01)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    return programs_run(opt.step)


def test_adam_step_programs_do_not_grow_with_parameter_count():
    assert programs_per_step(3, torch.optim.Adam) == programs_per_step(24, torch.optim.Adam)


def test_many_parameters():
    """300 parameter tensors (a signature of thousands of tensors) step as one
    foreach call per op, matching the CPU."""
    n = 300
    cpu = [torch.randn(2, 3, requires_grad=True) for _ in range(n)]
    tpu = [p.detach().to("tpu").requires_grad_() for p in cpu]
    opts = [torch.optim.AdamW(cpu, lr=0.01), torch.optim.AdamW(tpu, lr=0.01)]
    for step in range(3):
        for params, opt in zip([cpu, tpu], opts):
            for i, p in enumerate(params):
                p.grad = torch.full_like(p, 0.01 * (i - step))
            opt.step()
    for c, t in zip(cpu, tpu):
        assert_param_close(t.detach(), c.detach(), "param")
    assert programs_per_step(n, torch.optim.AdamW) == programs_per_step(3, torch.optim.AdamW)


def test_aliasing_late_in_a_long_list_is_part_of_the_signature():
    """A list whose 500th item shares storage with another one, then the
    same shapes with no sharing: each call gets its own program."""
    cpu = [torch.randn(3) for _ in range(600)]
    for shared in [True, False]:
        others = [x * 2 for x in cpu]
        if shared:
            others[500] = cpu[3]
        expected = torch._foreach_add(cpu, others)
        xs = [x.to("tpu") for x in cpu]
        ys = [xs[3] if shared and i == 500 else y.to("tpu") for i, y in enumerate(others)]
        for e, a in zip(expected, torch._foreach_add(xs, ys)):
            assert_close(a, e)
