"""Reductions on tpu against PyTorch's CPU results: sum, mean, prod, amax/amin,
max/min, argmax/argmin, var/std, norms, all/any, count_nonzero, logsumexp,
cumsum/cumprod, cummax/cummin, logcumsumexp, softmax/log_softmax, trace."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check, programs_run  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]
NAN, INF = float("nan"), float("inf")


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 6, shape, generator=g).to(dtype)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


# ---- sum, nansum, mean, prod ----

# dim=[] reduces everything, like None.
DIMS = [dict(), dict(dim=1), dict(dim=-1, keepdim=True), dict(dim=(0, 2)), dict(dim=[])]


@pytest.mark.parametrize("dtype", ALL)
def test_sum(dtype):
    check(lambda x: torch.sum(x, (0, 2)), make((3, 4, 5), dtype))


@pytest.mark.parametrize("kw", DIMS)
def test_sum_mean_dims(kw):
    check(lambda x: torch.sum(x, **kw), make((3, 4, 5), torch.float32))
    check(lambda x: torch.mean(x, **kw), make((3, 4, 5), torch.float32))
    check(lambda x: torch.sum(x, **kw), make((3, 4, 5), torch.int16))


@pytest.mark.parametrize("src,dst", [(torch.int32, torch.float32), (torch.float32, torch.float64),
                                     (torch.bool, torch.int32), (torch.float16, torch.float32)])
def test_sum_mean_dtype_arg(src, dst):
    check(lambda x: x.sum(1, dtype=dst), make((4, 6), src))
    if dst.is_floating_point:
        check(lambda x: x.mean(0, dtype=dst), make((4, 6), src))


def test_nansum():
    x = make((4, 5), torch.float32)
    x[1, 2] = x[3, 0] = float("nan")
    check(lambda x: torch.nansum(x), x)
    check(lambda x: torch.nansum(x, 1, keepdim=True), x)
    check(lambda x: torch.nansum(x, 0), make((4, 5), torch.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean(dtype):
    check(lambda x: torch.mean(x, (0, 2)), make((3, 4, 5), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64] + INTS + [torch.bool])
def test_prod(dtype):
    check(lambda x: torch.prod(x, -1, keepdim=True), make((3, 4, 5), dtype))


def test_prod_all():
    check(lambda x: torch.prod(x), make((3, 4), torch.float32))
    check(lambda x: torch.prod(x, 0), make((3, 4), torch.int64))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_prod_half_accumulates_in_float32(dtype):
    # PyTorch's CPU prod rounds every partial product to the half type; the
    # tpu lowering accumulates in float32 and rounds once, so compare with that.
    x = make((3, 6), dtype)
    assert_close(x.to("tpu").prod(1), x.float().prod(1).to(dtype))
    assert_close(x.to("tpu").prod(), x.float().prod().to(dtype))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_trace(dtype):
    """The diagonal's sum: int64 for integers, float32 sums for half types;
    wide, tall, square, empty, transposed matrices."""
    for shape in [(4, 6), (6, 3), (5, 5), (0, 3)]:
        check(torch.trace, make(shape, dtype))
    check(lambda x: torch.trace(x.t()), make((4, 6), dtype))


def test_trace_gradient_and_errors():
    def grad(x):
        x = x.detach().requires_grad_()
        (torch.trace(x) * 3).backward()
        return x.grad
    check(grad, make((4, 6), torch.float32))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        torch.trace(torch.ones(2, 2, 2, device="tpu"))
    assert torch.trace(torch.eye(3, device="tpu")).item() == 3


def test_sum_mean_prod_empty_and_0d():
    e = torch.zeros(0, 3)
    for fn in [torch.sum, torch.prod, torch.mean, torch.nansum]:
        check(lambda x: fn(x), e)
        check(lambda x: fn(x, 0), e)
        check(lambda x: fn(x, 1), e)
    check(lambda x: x.sum(0, keepdim=True), e)
    check(lambda x: x.sum(), torch.zeros(0, dtype=torch.int8))
    s = torch.tensor(2.5)
    for fn in [torch.sum, torch.prod, torch.mean]:
        check(lambda x: fn(x), s)
        check(lambda x: fn(x, 0), s)
    check(lambda x: x.sum(-1, keepdim=True), s)
    check(lambda x: x.sum(), torch.tensor(True))


# ---- amax, amin, max, min, argmax, argmin ----

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin(dtype, op):
    check(lambda x: getattr(torch, op)(x, (0, -1), keepdim=True), make((3, 4, 5), dtype))


@pytest.mark.parametrize("kw", DIMS)
def test_amax_amin_dims(kw):
    check(lambda x: torch.amax(x, **kw), make((3, 4, 5), torch.float32))
    check(lambda x: torch.amin(x, **kw), make((3, 4, 5), torch.int32))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min(dtype, op):
    # Few distinct values, so ties are common: indices must be the first one.
    x = make((4, 7), dtype)
    f = getattr(torch, op)
    check(lambda x: f(x), x)
    check(lambda x: tuple(f(x, -1)), x)
    check(lambda x: tuple(f(x, 0, keepdim=True)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.uint8,
                                   torch.bool])
def test_aminmax(dtype):
    x = make((4, 7), dtype)
    check(lambda x: tuple(torch.aminmax(x)), x)
    check(lambda x: tuple(torch.aminmax(x, dim=-1, keepdim=True)), x)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(dtype, op):
    f = getattr(torch, op)
    check(lambda x: f(x), make((4, 7), dtype))
    check(lambda x: f(x, -1, keepdim=True), make((4, 7), dtype))


def test_argmax_argmin_dims():
    x = make((4, 7), torch.float32)
    check(lambda x: x.argmax(0), x)
    check(lambda x: x.argmin(keepdim=True), x)


def test_extremes_nan_and_ties():
    nan = float("nan")
    inf = math.inf
    x = torch.tensor([[1.0, nan, 3.0, nan], [2.0, 5.0, 5.0, -1.0], [-inf, -inf, 0.0, inf]])
    for op in ["max", "min"]:
        f = getattr(torch, op)
        check(lambda x: f(x), x)
        check(lambda x: tuple(f(x, 1)), x)
        check(lambda x: tuple(f(x, 0)), x)
    for op in ["amax", "amin", "argmax", "argmin"]:
        check(lambda x: getattr(torch, op)(x, 1), x)
        check(lambda x: getattr(torch, op)(x, 0), x)
    check(lambda x: x.argmax(), x)
    check(lambda x: x[1:].argmin(), x)


def test_integer_extremes():
    for dtype in INTS:
        info = torch.iinfo(dtype)
        x = torch.tensor([[info.min, info.max, 0], [info.min, info.min, info.min]], dtype=dtype)
        for op in ["amax", "amin"]:
            check(lambda x: getattr(torch, op)(x, 1), x)
        check(lambda x: tuple(torch.max(x, 1)), x)
        check(lambda x: tuple(torch.min(x, 1)), x)


def test_extremes_empty_and_0d():
    e = torch.zeros(0, 3)
    check(lambda x: x.amax(1), e)
    check(lambda x: tuple(x.max(1)), e)
    check(lambda x: x.argmin(1), e)
    s = torch.tensor(-4.0)
    for f in [torch.max, torch.min, torch.amax, torch.argmax, torch.argmin]:
        check(lambda x: f(x), s)
    check(lambda x: tuple(torch.max(x, 0)), s)
    check(lambda x: tuple(torch.min(x, -1, keepdim=True)), s)
    check(lambda x: x.argmax(0), s)
    check(lambda x: x.amax(0), s)
    with pytest.raises(Exception):
        torch.zeros(0, device="tpu").amax()


def test_binary_max_min():
    a, b = make((3, 4), torch.float32), make((4,), torch.float32, seed=1)
    b[2] = float("nan")
    check(lambda a, b: torch.max(a, b), a, b)
    check(lambda a, b: torch.min(a, b), a, b)


# ---- var, std, var_mean, std_mean ----

@pytest.mark.parametrize("dtype", FLOATS)
def test_var_std(dtype):
    x = make((3, 4, 5), dtype) * 3 + 1
    check(lambda x: torch.var(x, (0, 2), keepdim=True), x)
    check(lambda x: torch.std(x, 1), x)
    check(lambda x: tuple(torch.var_mean(x, 1)), x)
    check(lambda x: tuple(torch.std_mean(x)), x)


@pytest.mark.parametrize("kw", [dict(), dict(dim=(0, 2), keepdim=True), dict(dim=-1, correction=0),
                                dict(dim=1, correction=2.5), dict(unbiased=False), dict(dim=[])])
def test_var_std_args(kw):
    x = make((3, 4, 5), torch.float32) * 3 + 1
    check(lambda x: torch.var(x, **kw), x)
    check(lambda x: tuple(torch.std_mean(x, **kw)), x)


def test_var_std_degenerate():
    # Fewer elements than the correction: inf or nan like PyTorch; empty: nan.
    check(lambda x: x.var(1), make((3, 1), torch.float32))
    check(lambda x: x.std(1, correction=3), make((3, 2), torch.float32))
    check(lambda x: x.var(), torch.zeros(0))
    check(lambda x: tuple(torch.var_mean(x, 0)), torch.zeros(0, 4))
    check(lambda x: x.var(), torch.tensor(3.0))
    check(lambda x: x.std(correction=0), torch.tensor(3.0))


# ---- norms ----

@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1])
def test_vector_norm(p):
    x = make((3, 4), torch.float32)
    x[0, 1] = 0
    check(lambda x: torch.linalg.vector_norm(x, p), x)
    check(lambda x: torch.linalg.vector_norm(x, p, dim=1), x)
    check(lambda x: torch.linalg.vector_norm(x, p, dim=(0,), keepdim=True), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_vector_norm_dtypes(dtype):
    x = make((3, 4), dtype)
    check(lambda x: torch.linalg.vector_norm(x, 2, dim=1), x)
    check(lambda x: torch.linalg.vector_norm(x, math.inf), x)
    check(lambda x: torch.linalg.vector_norm(x, 3), x)


def test_norm_variants():
    x = make((3, 4, 2), torch.float32)
    check(lambda x: x.norm(), x)
    check(lambda x: torch.norm(x, "fro"), x)
    check(lambda x: torch.norm(x, p=1, dim=1), x)
    check(lambda x: torch.norm(x, p=math.inf, dim=(0, 2), keepdim=True), x)
    check(lambda x: torch.norm(x, dim=-1), x)
    check(lambda x: torch.linalg.vector_norm(x, dtype=torch.float64), x)
    check(lambda x: torch.linalg.vector_norm(x, 3, dim=2, dtype=torch.float64), x)
    check(lambda x: torch.linalg.norm(x, dim=1), x)
    check(lambda x: torch.nn.functional.normalize(x, dim=1), x)
    check(lambda x: x.norm(), torch.zeros(0, 3))
    check(lambda x: x.norm(1, dim=0), torch.zeros(0, 3))
    check(lambda x: x.norm(), torch.tensor(-3.0))
    with pytest.raises(Exception):
        torch.linalg.vector_norm(torch.zeros(0, device="tpu"), math.inf)


def renorm_input(dtype):
    """[4, 3, 5] values and a maxnorm between its slices' 2-norms along dim
    0, so some slices are scaled and others kept."""
    x = make((4, 3, 5), dtype) * 2
    norms = torch.linalg.vector_norm(x.double(), dim=(1, 2))
    return x, float(norms.median())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [2, 1, 3, 0.5, math.inf])
def test_renorm(dtype, p):
    x, maxnorm = renorm_input(dtype)
    for dim in (0, 1, -1):
        check(lambda x: torch.renorm(x, p, dim, maxnorm), x)
    check(lambda x: x.renorm_(p, 0, maxnorm), x)  # in place: check compares x too
    check(lambda x, out: torch.renorm(x, p, 0, maxnorm, out=out), x, torch.empty(4, 3, 5, dtype=dtype))


def test_renorm_views_empty_gradient_and_errors():
    x, maxnorm = renorm_input(torch.float32)
    check(lambda x: torch.renorm(x.transpose(0, 2)[::2], 2, 1, maxnorm), x)  # non-contiguous
    check(lambda x: torch.renorm(x, 2, 0, 0.0), x)  # every slice to (nearly) zero
    check(lambda x: torch.renorm(x, 2, 1, maxnorm), torch.zeros(0, 3, 5))
    check(lambda x: torch.renorm(x, 2, 0, maxnorm), torch.zeros(4, 0))
    g = make((4, 3, 5), torch.float32, seed=1)

    def grad(x, g):
        x = x.clone().requires_grad_()
        (dx,) = torch.autograd.grad(torch.renorm(x, 2, 0, maxnorm), x, g)
        return dx

    check(grad, x, g)
    for bad, message in ((lambda d: torch.renorm(torch.ones(5, device=d), 2, 0, 1.0), "at least 2 dimensions"),
                         (lambda d: torch.renorm(torch.ones(2, 5, device=d), 0, 0, 1.0), "non-positive-norm"),
                         (lambda d: torch.renorm(torch.ones(2, 5, device=d), 2, 0, -1.0), "maxnorm to be >= 0"),
                         (lambda d: torch.renorm(torch.ones(2, 5, dtype=torch.long, device=d), 2, 0, 1.0),
                          "floating point")):
        for device in ("cpu", "tpu"):
            with pytest.raises(RuntimeError, match=message):
                bad(device)
    assert torch.renorm(x.to("tpu"), 2, 0, maxnorm).cpu().isfinite().all()  # still working


# ---- all, any, count_nonzero ----

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["all", "any"])
def test_all_any(dtype, op):
    x = make((3, 4, 2), dtype)
    if dtype.is_floating_point:
        x[0, 0, 0] = float("nan")
        x[1] = 0
    f = getattr(torch, op)
    check(lambda x: f(x), x)
    check(lambda x: f(x, -1, keepdim=True), x)


def test_all_any_dims():
    x = make((3, 4, 2), torch.float32)
    x[1] = 0
    for f in [torch.all, torch.any]:
        check(lambda x: f(x, 1), x)
        check(lambda x: f(x, (0, 2)), x)
        check(lambda x: f(x, ()), x)  # dim=() reduces nothing here


def test_all_any_empty_and_0d():
    for op in ["all", "any"]:
        f = getattr(torch, op)
        check(lambda x: f(x), torch.zeros(0, 3))
        check(lambda x: f(x, 0), torch.zeros(0, 3))
        check(lambda x: f(x, 1), torch.zeros(0, 3))
        check(lambda x: f(x), torch.tensor(0.5))
        check(lambda x: f(x, 0), torch.tensor(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool, torch.bfloat16])
def test_count_nonzero(dtype):
    x = make((3, 4, 2), dtype)
    if dtype.is_floating_point:
        x[1] = 0
        x[0, 0, 0] = float("nan")
    check(lambda x: torch.count_nonzero(x), x)
    check(lambda x: torch.count_nonzero(x, 1), x)
    check(lambda x: torch.count_nonzero(x, (0, -1)), x)
    check(lambda x: torch.count_nonzero(x), torch.zeros(0, 2))


# ---- logsumexp, softmax, log_softmax ----

@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
def test_logsumexp(dtype):
    x = make((3, 4, 5), dtype)
    check(lambda x: torch.logsumexp(x, 1), x)
    check(lambda x: torch.logsumexp(x, (0, 2), keepdim=True), x)


def test_logsumexp_special():
    inf = math.inf
    x = torch.tensor([[-inf, -inf, -inf], [inf, 1.0, 2.0], [1000.0, 1000.0, -inf],
                      [float("nan"), 0, 1]])
    check(lambda x: torch.logsumexp(x, 1), x)
    check(lambda x: torch.logsumexp(x, 1), torch.zeros(2, 0))
    check(lambda x: torch.logsumexp(x, 0), torch.tensor(3.0))


def test_logsumexp_is_one_program():
    # PyTorch's composite kernel, which would otherwise win over the fallback, runs nine.
    assert programs_run(torch.logsumexp, torch.randn(4, 6).to("tpu"), 1) == 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, -1])
def test_safe_softmax(dtype, dim):
    # _safe_softmax (attention's math form): 0 for a row of only -inf, NaN
    # kept, -inf entries 0 elsewhere.
    x = make((4, 5), torch.float32) * 3
    x[1] = -INF
    x[2, :3] = -INF
    x[3, 4] = NAN
    x[:, 0] = torch.where(torch.arange(4) == 0, -INF, x[:, 0])
    x = x.to(dtype)
    check(lambda x: torch.ops.aten._safe_softmax(x, dim), x)
    check(lambda x: torch.ops.aten._safe_softmax(x, dim, dtype=torch.float64), x)
    check(lambda x: torch.ops.aten._safe_softmax(x, 0), torch.tensor(-INF, dtype=dtype))
    check(lambda x: torch.ops.aten._safe_softmax(x, 1), torch.zeros(2, 0, dtype=dtype))


def test_safe_softmax_gradient_and_one_program():
    x = make((3, 6), torch.float32)
    x[0] = -INF
    cpu, dev = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    g = make((3, 6), torch.float32, seed=1)
    torch.ops.aten._safe_softmax(cpu, -1).backward(g)
    torch.ops.aten._safe_softmax(dev, -1).backward(g.to("tpu"))
    assert_close(dev.grad, cpu.grad)
    # PyTorch's composite kernel, which would otherwise win over the fallback, runs five.
    assert programs_run(lambda t: torch.ops.aten._safe_softmax(t, -1), x.to("tpu")) == 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dtype, op, dim):
    x = make((3, 4, 5), dtype) * 4
    check(lambda x: getattr(torch, op)(x, dim), x)


def test_softmax_special():
    inf = math.inf
    x = torch.tensor([[-inf, -inf, -inf], [inf, 1.0, 2.0], [1000.0, 1000.0, -inf],
                      [-1000.0, 0.0, 1.0]])
    for op in ["softmax", "log_softmax"]:
        f = getattr(torch, op)
        check(lambda x: f(x, 1), x)
        check(lambda x: f(x, 0), torch.tensor(3.0))
        check(lambda x: f(x, 1), torch.zeros(0, 3))
        check(lambda x: f(x, 0), torch.zeros(0, 3))
        check(lambda x: f(x, 1, dtype=torch.float64), x)
    # half_to_float: PyTorch's CPU kernel refuses it, so compare with float32.
    h = make((3, 5), torch.float16)
    assert_close(torch._softmax(h.to("tpu"), 1, True), torch._softmax(h.float(), 1, False))
    assert_close(torch._log_softmax(h.to("tpu"), 0, True), torch._log_softmax(h.float(), 0, False))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward(dtype, log):
    x, g = make((3, 5), dtype), make((3, 5), dtype, seed=1)
    y = torch._log_softmax(x, 1, False) if log else torch._softmax(x, 1, False)
    op = torch.ops.aten._log_softmax_backward_data if log else torch.ops.aten._softmax_backward_data
    check(lambda g, y: op(g, y, 1, dtype), g, y)


def test_softmax_autograd():
    x = make((3, 5), torch.float32)
    g = make((3, 5), torch.float32, seed=1)

    def fn(x, g):
        x = x.clone().requires_grad_()
        y = torch.softmax(x, 1) + torch.log_softmax(x, 1)
        (grad,) = torch.autograd.grad(y, x, g)
        return grad

    check(fn, x, g)


# ---- cumsum, cumprod ----

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumulative(dtype, op):
    x = make((3, 6), dtype)
    if dtype.is_floating_point and op == "cumprod":
        x = x.abs() + 0.5  # keep partial products in range
    check(lambda x: getattr(torch, op)(x, 1), x)


def test_cumulative_args():
    x = make((3, 6), torch.float32)
    check(lambda x: torch.cumsum(x, 0), x)
    check(lambda x: torch.cumprod(x, -1, dtype=torch.float64), x)
    check(lambda x: torch.cumsum(x, -1, dtype=torch.float64), make((3, 6), torch.int8))


def test_cumulative_edge_cases():
    check(lambda x: x.cumsum(0), torch.tensor(2.0))
    check(lambda x: x.cumsum(1), torch.zeros(0, 3))
    check(lambda x: x.cumsum(0), torch.zeros(0, 3))
    check(lambda x: x.cumsum(1), torch.ones(3, 1))
    check(lambda x: x.cumsum(0), torch.arange(300, dtype=torch.float32))
    check(lambda x: x.cumsum(0), torch.randint(-9, 10, (1001,)))  # odd length, > 2^9
    check(lambda x: x.cumprod(1), torch.randint(-2, 3, (2, 67)))


# ---- cummax, cummin, logcumsumexp ----

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(dtype, op):
    """Values and indices; small integer ranges make many ties, whose index
    is the later one."""
    check(lambda x: getattr(torch, op)(x, 1), make((3, 37), dtype))
    check(lambda x: getattr(torch, op)(x, 0), make((5, 4), dtype))


def test_cummax_cummin_nan_inf_edges_views_and_gradients():
    x = make((2, 9), torch.float32)
    x[0, 3] = x[0, 6] = NAN
    x[1, 2], x[1, 5] = -INF, INF
    for op in (torch.cummax, torch.cummin):
        check(lambda x: op(x, 1), x)
        check(lambda x: op(x.t(), 0), x)
        check(lambda x: op(x, 0), torch.tensor(3.0))
        check(lambda x: op(x, 1), torch.zeros(2, 0))

        def grad(x):
            x = x.detach().requires_grad_()
            (op(x, 1).values * torch.arange(9.0, device=x.device)).sum().backward()
            return x.grad
        check(grad, make((2, 9), torch.float32))
    values, indices = torch.empty(2, 9), torch.empty(2, 9, dtype=torch.long)
    check(lambda x, v, i: torch.cummax(x, 1, out=(v, i)), make((2, 9), torch.float32), values, indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_logcumsumexp(dtype):
    """Float32 at rtol 1e-5: the log-depth scan adds in another order than
    PyTorch's loop."""
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    check(lambda x: torch.logcumsumexp(x, 1), (make((3, 67), dtype) * 30), **tol)
    check(lambda x: torch.logcumsumexp(x, 0), make((4, 5), dtype), **tol)


def test_logcumsumexp_infinities_nan_edges_and_gradients():
    x = torch.tensor([[-INF, -INF, 0.0, INF, 1.0, INF], [1.0, NAN, 2.0, -INF, 3.0, 4.0]])
    check(lambda x: torch.logcumsumexp(x, 1), x)
    check(lambda x: torch.logcumsumexp(x, 0), torch.tensor(2.0))
    check(lambda x: torch.logcumsumexp(x, 1), torch.zeros(2, 0))
    check(lambda x, out: torch.logcumsumexp(x, 1, out=out), make((3, 7), torch.float32), torch.empty(0),
          rtol=1e-5, atol=1e-5)
    assert torch.logcumsumexp(torch.empty(3, 7, device="meta"), 1).shape == (3, 7)  # torch_tpu/_meta.py

    def grad(x):
        x = x.detach().requires_grad_()
        (torch.logcumsumexp(x, 1) * torch.arange(7.0, device=x.device)).sum().backward()
        return x.grad
    check(grad, make((3, 7), torch.float32), rtol=1e-5, atol=1e-5)


# ---- long rows and columns ----
# A reduction over the trailing dims (rows) or the leading ones (columns) of
# more than 32 elements is folded by slices before the reduce (see
# csrc/hlo/reduce.c): lengths just past 32, one not a multiple of the slice
# width (the last slice padded), exactly 32 x 32, past it (folded twice),
# several dims at once, and every dim.
LONG = [((3, 33), (1,)), ((2, 100), (1,)), ((3, 1024), (1,)), ((2, 1025), (1,)), ((2, 5000), (1,)),
        ((2, 7, 40), (1, 2)), ((33, 3), (0,)), ((100, 2), (0,)), ((1025, 3), (0,)), ((40, 7, 2), (0, 1)),
        ((70, 40), (0, 1))]


@pytest.mark.parametrize("shape,dims", LONG)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_long_sum_mean_prod(shape, dims, dtype):
    x = make(shape, dtype)
    check(lambda x: torch.sum(x, dims), x)
    if dtype.is_floating_point:
        check(lambda x: torch.mean(x, dims, keepdim=True), x)
    if dtype == torch.float32:  # PyTorch's CPU prod rounds each product in bfloat16
        # prod takes one dim: the reduced dims flattened into one. Factors
        # near 1, so that thousands of them neither overflow nor vanish.
        check(lambda x: torch.prod(1 + x.flatten(dims[0], dims[-1]) / 100, dims[0]), x, rtol=1e-4)
    check(lambda x: torch.sum(x.transpose(0, -1), tuple(x.dim() - 1 - d for d in dims)), x)  # strided input


@pytest.mark.parametrize("shape,dims", LONG)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_long_amax_amin(shape, dims, dtype):
    x = make(shape, dtype)
    check(lambda x: (torch.amax(x, dims), torch.amin(x, dims)), x)
    if dtype.is_floating_point:
        # A NaN alone in the last (padded) slice, and one in the first, still wins.
        flat = x.clone().flatten()
        flat[-1] = NAN
        check(lambda x: (torch.amax(x, dims), torch.amin(x, dims)), flat.view(shape))
        flat = x.clone().flatten()
        flat[0] = NAN
        check(lambda x: (torch.amax(x, dims), torch.amin(x, dims)), flat.view(shape))


@pytest.mark.parametrize("shape,dims", LONG)
def test_long_all_any(shape, dims):
    ones = torch.ones(shape, dtype=torch.bool)
    last_false = ones.clone().flatten()
    last_false[-1] = False
    for x in (ones, last_false.view(shape), ~ones, ~last_false.view(shape), make(shape, torch.bool)):
        check(lambda x: (torch.all(x, dims[0]), torch.any(x, dims[-1])), x)


@pytest.mark.parametrize("n", [33, 100, 1025])
def test_long_softmax_rows(n):
    x = make((5, n), torch.float32) * 4
    x[1, n - 1] = NAN  # a NaN in the last slice: the whole row NaN
    x[2, 0] = INF  # +inf: PyTorch's row of NaN
    x[3, :] = -INF  # every entry -inf: NaN, 0 from _safe_softmax
    x[4, : n // 2] = -INF
    for dim in (1, 0):
        check(lambda x: torch.softmax(x, dim), x)
        check(lambda x: torch.log_softmax(x, dim), x)
        check(lambda x: torch.logsumexp(x, dim), x)
        check(lambda x: torch.ops.aten._safe_softmax(x, dim), x)
    y = make((3, n), torch.float32)
    y[1, n - 1] = NAN
    y[2, :] = -INF
    y[2, n - 1] = NAN  # a NaN among -inf: not an empty row, so NaN
    check(lambda y: torch.ops.aten._safe_softmax(y, 1), y)


# ---- views, in-place and out= ----

def test_non_contiguous_inputs():
    x = make((4, 6, 3), torch.float32)
    check(lambda x: x.transpose(0, 2).sum(0), x)
    check(lambda x: x[:, ::2].amax(1), x)
    check(lambda x: tuple(x.permute(2, 0, 1).max(-1)), x)
    check(lambda x: x.transpose(1, 2).argmax(1), x)
    check(lambda x: x[1:, :, 0].var(0), x)
    check(lambda x: x.transpose(0, 1).softmax(-1), x)
    check(lambda x: x.transpose(0, 2).cumsum(1), x)
    check(lambda x: torch.linalg.vector_norm(x[::2, 1:], dim=1), x)
    check(lambda x: (x.transpose(0, 1) > 0).all(0), x)
    check(lambda x: x.expand(2, 4, 6, 3).mean((0, 3)), x)


def test_out_variants():
    x = make((4, 6), torch.float32)

    def reductions(x):
        o = torch.empty(6, device=x.device)
        torch.sum(x, 0, out=o)
        v = torch.empty(4, device=x.device)
        i = torch.empty(4, dtype=torch.long, device=x.device)
        torch.max(x, 1, out=(v, i))
        s = torch.empty(4, device=x.device)
        torch.std(x, 1, out=s)
        c = torch.empty(4, 6, device=x.device)
        torch.cumsum(x, 1, out=c)
        return o, v, i, s, c, torch.amax(x, 0, out=torch.empty(6, device=x.device))

    check(reductions, x)
    # out= of another dtype: the result is computed in (and cast to) out's dtype.
    check(lambda x: torch.sum(x, 1, out=torch.empty(4, dtype=torch.float64, device=x.device)), x)


def test_writes_through_views():
    def into_view(x):
        base = torch.zeros(6, 3, device=x.device)
        torch.sum(x, 0, out=base[:, 1])
        torch.mean(x, 0, keepdim=True, out=base.t()[2:])
        return base

    check(into_view, make((4, 6), torch.float32))
    check(lambda x: x[:, 1:].cumsum_(1), make((3, 5), torch.float32))
    check(lambda x: x.t().cumsum_(0), make((3, 5), torch.int64))
    y = make((3, 5), torch.float32)
    check(lambda y: y.t()[1:].cumprod_(1), y)
