"""Elementwise ops on tpu against PyTorch's CPU results: arithmetic, division
modes, remainder, pow, min/max, bitwise and logical ops, comparisons, where,
clamp, casts, unary math, rounding, predicates, nan_to_num, lerp,
addcmul/addcdiv, fill/zero, gcd/lcm, frexp; with scalars, broadcasting, 0-d and empty
tensors, non-contiguous inputs, in-place, out= and writes through views."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check, programs_run  # noqa: E402

import torch_tpu.metrics  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]
NAN, INF = float("nan"), float("inf")


def make(shape, dtype, lo=-5, hi=5, seed=0, nonzero=False):
    """Random values in [lo, hi); integers avoid 0 when nonzero is set."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        lo = max(lo, 0) if dtype == torch.uint8 else lo
        x = torch.randint(lo, hi, shape, generator=g)
        if nonzero:
            x[x == 0] = hi - 1 if hi - 1 != 0 else 1
        return x.to(dtype)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    if nonzero:
        x[x.abs() < 0.1] = 0.5
    return x.to(dtype)


# Shape pairs for binary ops: same, broadcast both ways, with 0-d, empty;
# every dtype gets the first few.
SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 3), (1, 3)), ((2, 3, 4), (4,)),
          ((2, 3), ()), ((), ())]
DTYPE_SHAPES = [(d, s) for d in ALL for s in (SHAPES if d in (torch.float32, torch.int32, torch.bool)
                                              else SHAPES[:3])]


# ---- add / sub / mul ----

@pytest.mark.parametrize("dtype,shapes", DTYPE_SHAPES)
def test_add_mul(dtype, shapes):
    a, b = make(shapes[0], dtype, seed=1), make(shapes[1], dtype, seed=2)
    check(torch.add, a, b)
    check(torch.mul, a, b)
    if dtype != torch.bool:
        check(torch.sub, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int8])
def test_add_sub_rsub_alpha(dtype):
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    alpha = 3 if not dtype.is_floating_point else 0.5
    check(lambda x, y: torch.add(x, y, alpha=alpha), a, b)
    check(lambda x, y: torch.sub(x, y, alpha=alpha), a, b)
    check(lambda x, y: torch.rsub(x, y, alpha=alpha), a, b)
    check(lambda x: torch.rsub(x, 7, alpha=2), a)


def test_int8_uint8_wrap():
    a = torch.tensor([100, 120, -128, 127], dtype=torch.int8)
    check(lambda x: x + x, a)
    check(lambda x: x * 3, a)
    check(lambda x: x - 100, a)
    check(lambda x: -x, a)
    u = torch.tensor([0, 1, 200, 255], dtype=torch.uint8)
    check(lambda x: x + 100, u)
    check(lambda x: x - 2, u)
    check(lambda x: x * x, u)


def test_mixed_dtypes_promote():
    i32, f16 = make((3, 4), torch.int32), make((3, 4), torch.float16, seed=1)
    bf16, u8, i8 = make((4,), torch.bfloat16, seed=2), make((4,), torch.uint8), make((4,), torch.int8)
    check(torch.add, i32, f16)
    check(torch.mul, f16, bf16)  # -> float32
    check(torch.add, u8, i8)  # -> int16
    check(torch.sub, make((3, 4), torch.float64), make((3, 4), torch.float32))
    check(torch.mul, make((3, 4), torch.bool), i32)
    # A 0-d tensor does not promote a dimensioned one of its category.
    check(torch.add, f16, torch.tensor(2.5, dtype=torch.float64))
    check(torch.add, i32, torch.tensor(2.5, dtype=torch.float64))


# Python scalars of each type, on each side.
SCALARS = [2, -3, 2.5, True, False]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int16,
                                   torch.uint8, torch.bool])
@pytest.mark.parametrize("s", SCALARS)
def test_scalar_operands(dtype, s):
    x = make((2, 3), dtype)
    if dtype != torch.bool or isinstance(s, bool):
        check(lambda x: x + s, x)
        check(lambda x: s * x, x)
    if dtype != torch.bool and not isinstance(s, bool):
        check(lambda x: x - s, x)
        check(lambda x: s - x, x)
        check(lambda x: x / s, x)


def test_runtime_scalars_do_not_recompile():
    x = make((5,), torch.float32).to("tpu")
    expected = x.cpu()
    ops = [lambda t, s: t + s, lambda t, s: t * (s / 2), lambda t, s: torch.add(t, t, alpha=s),
           lambda t, s: t.clamp(min=s / 4), lambda t, s: torch.where(t > 0, t, s / 3),
           lambda t, s: t.lerp(t * 2, s / 8), lambda t, s: torch.empty_like(t).fill_(s)]
    for op in ops:
        assert_close(op(x, 2), op(expected, 2))  # compiles here
    before = torch_tpu.metrics.counters()["compile"]
    for s in (3, 4, -7):
        for op in ops:
            assert_close(op(x, s), op(expected, s))
    assert torch_tpu.metrics.counters()["compile"] == before


# ---- division, remainder ----

DIV_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
              torch.int32, torch.int8, torch.uint8]


@pytest.mark.parametrize("dtype", DIV_DTYPES)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div(dtype, mode):
    a = make((4, 5), dtype, lo=-20, hi=20, seed=1)
    b = make((5,), dtype, lo=-6, hi=6, seed=2, nonzero=True)
    check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    check(lambda x: torch.div(x, 3, rounding_mode=mode), a)
    if dtype.is_floating_point:
        check(lambda x: torch.div(x, -2.5, rounding_mode=mode), a)


def test_div_special_values():
    a = torch.tensor([1.0, -1.0, 0.0, -0.0, INF, -INF, NAN, 7.5, -7.5, 1e30, 5.0])
    b = torch.tensor([0.0, 0.0, 0.0, 2.0, 2.0, -3.0, 1.0, INF, 2.0, 1e-30, -1e-30])
    for mode in (None, "trunc", "floor"):
        check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    check(lambda x, y: x // y, a, b)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32,
                                   torch.float64, torch.bfloat16])
def test_floor_divide_remainder_fmod(dtype):
    a = make((6, 4), dtype, lo=-17, hi=17, seed=3)
    b = make((6, 4), dtype, lo=-5, hi=5, seed=4, nonzero=True)
    check(lambda x, y: x // y, a, b)
    check(lambda x, y: x % y, a, b)
    check(torch.fmod, a, b)
    check(lambda x: x // 3, a)
    check(lambda x: x % 3, a)
    check(lambda x: torch.fmod(x, 3), a)
    if dtype != torch.uint8:
        check(lambda x: x % -3, a)
        check(lambda x: torch.fmod(x, -3), a)
    check(lambda y: 7 % y, b)  # remainder.Scalar_Tensor


def test_int_true_division_is_float():
    a, b = make((3, 4), torch.int64, seed=1), make((3, 4), torch.int32, seed=2, nonzero=True)
    check(torch.div, a, b)
    check(torch.true_divide, a, b)
    check(lambda x: x / 4, a)
    check(lambda x: x / 2.5, make((3, 4), torch.bool))


# ---- pow ----

@pytest.mark.parametrize("dtype", FLOATS)
def test_pow_float(dtype):
    base = make((3, 4), dtype, lo=0.1, hi=3, seed=1)
    exp = make((3, 4), dtype, lo=-2, hi=3, seed=2)
    check(torch.pow, base, exp)
    for e in (2, 3, 0.5, -1, -0.5, 0, 2.5):
        check(lambda x: x ** e, base)
    check(lambda x: 2 ** x, exp)
    check(lambda x: 0.5 ** x, exp)
    check(lambda x: x ** 2, make((3, 4), dtype, seed=3))  # negative bases
    check(torch.pow, torch.tensor([0.0, -2.0, -8.0, INF, NAN, 1.0], dtype=dtype),
          torch.tensor([-1.0, 0.5, 3.0, -1.0, 0.0, NAN], dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_pow_int(dtype):
    base = make((12,), dtype, lo=-4, hi=5, seed=1)
    exp = make((12,), dtype, lo=0, hi=4, seed=2)
    check(torch.pow, base, exp)
    check(lambda x: x ** 3, base)
    check(lambda x: 2 ** x, exp)
    check(lambda x: x ** 0.5, exp.abs())  # float exponent -> float result
    if dtype != torch.uint8:
        # Negative exponents: 1 / x^-y truncated, as the CPU computes it.
        check(torch.pow, torch.tensor([1, -1, -1, 2, 0, 3, -3, 0, 5, -2], dtype=dtype),
              torch.tensor([-1, -3, -2, -2, 2, 2, 3, -5, -1, -4], dtype=dtype))


# ---- maximum / minimum / fmax / fmin / atan2 ----

@pytest.mark.parametrize("dtype", ALL)
def test_maximum_minimum(dtype):
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    check(torch.maximum, a, b)
    check(torch.minimum, a, b)
    if dtype != torch.bool:
        check(torch.fmax, a, b)
        check(torch.fmin, a, b)


def test_min_max_nan():
    a = torch.tensor([1.0, NAN, NAN, -2.0, -0.0])
    b = torch.tensor([NAN, 2.0, NAN, 3.0, 0.0])
    for op in (torch.maximum, torch.minimum, torch.fmax, torch.fmin):
        check(op, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int32])
def test_atan2(dtype):
    a, b = make((3, 4), dtype, seed=1), make((3, 1), dtype, seed=2)
    check(torch.atan2, a, b)
    check(torch.atan2, torch.tensor([0.0, -0.0, 1.0, -1.0, INF]), torch.tensor([-1.0, -1.0, 0.0, 0.0, INF]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.uint8,
                                   torch.bool])
def test_heaviside(dtype):
    """values where x is 0 (some zeros planted), 1 above, 0 below; values
    broadcast; in-place and out=."""
    x, values = make((4, 6), dtype, lo=-2, hi=3), make((6,), dtype, seed=1)
    x[::2, ::3] = 0
    check(torch.heaviside, x, values)
    check(lambda x, v: x.heaviside_(v), x, values)
    check(lambda x, v, out: torch.heaviside(x, v, out=out), x, values, torch.empty(4, 6, dtype=dtype))
    if dtype.is_floating_point:
        check(torch.heaviside, torch.tensor([0.0, -0.0, NAN, INF, -INF, 1e-30], dtype=dtype),
              torch.tensor([0.5], dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32])
def test_hypot(dtype):
    if dtype == torch.int32:  # the CPU has no integer hypot, nor has the tpu
        with pytest.raises(NotImplementedError, match="hypot"):
            torch.hypot(make((3,), dtype).to("tpu"), make((3,), dtype).to("tpu"))
        return
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    check(torch.hypot, a, b)
    check(lambda x, y: x.hypot_(y), a, b)
    big = 3e38 if dtype != torch.float64 else 1e308
    check(torch.hypot, torch.tensor([big, 1e-30, 0.0, INF, NAN, -INF, 3.0]),
          torch.tensor([big, 1e-30, 0.0, NAN, 1.0, 2.0, -4.0]))


@pytest.mark.parametrize("op", [torch.logaddexp, torch.logaddexp2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64])
def test_logaddexp(op, dtype):
    if dtype == torch.int64:  # float only, as on the CPU
        with pytest.raises(NotImplementedError, match=op.__name__):
            op(make((3,), dtype).to("tpu"), make((3,), dtype).to("tpu"))
        return
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    check(op, a, b)  # broadcast
    check(lambda x, y: op(x.t(), y.t()), make((4, 3), dtype, seed=3), make((4, 3), dtype, seed=4))  # views
    check(lambda x, y, out: op(x, y, out=out), a, b, torch.empty(3, 4, dtype=dtype))
    check(op, torch.tensor(1.5, dtype=dtype), torch.tensor(-2.0, dtype=dtype))  # 0-d
    check(op, torch.zeros(0, 4, dtype=dtype), b)  # empty
    check(op, torch.tensor([INF, -INF, INF, 1.0, NAN, 80.0, -80.0], dtype=dtype),  # no overflow, no inf - inf
          torch.tensor([INF, -INF, -INF, -INF, 0.0, 80.0, -81.0], dtype=dtype))
    x, y = make((3, 4), torch.float32, seed=5).requires_grad_(), make((3, 4), torch.float32, seed=6).requires_grad_()
    xt, yt = x.detach().to("tpu").requires_grad_(), y.detach().to("tpu").requires_grad_()
    op(x, y).sum().backward()
    op(xt, yt).sum().backward()
    assert_close(xt.grad, x.grad)
    assert_close(yt.grad, y.grad)


def fibonacci_pairs(dtype):
    """The two largest Fibonacci numbers the dtype holds, both ways round:
    the pairs that take Euclid's algorithm the most steps."""
    bound = torch.iinfo(dtype).max
    fib = [1, 2]
    while fib[-1] + fib[-2] <= bound:
        fib.append(fib[-1] + fib[-2])
    return torch.tensor([fib[-1], fib[-2]], dtype=dtype), torch.tensor([fib[-2], fib[-1]], dtype=dtype)


@pytest.mark.parametrize("op", [torch.gcd, torch.lcm])
@pytest.mark.parametrize("dtype", INTS)
def test_gcd_lcm(op, dtype):
    a, b = make((3, 4), dtype, -30, 30, seed=1), make((4,), dtype, -30, 30, seed=2)
    check(op, a, b)  # broadcast, zeros and signs among the values
    check(lambda x, y: op(x.t(), y[::2].t()), make((4, 3), dtype, seed=3), make((8, 3), dtype, seed=4))  # views
    check(lambda x, y, out: op(x, y, out=out), a, b, torch.empty(3, 4, dtype=dtype))
    check(lambda x, y: x.gcd_(y) if op is torch.gcd else x.lcm_(y), a, b)  # in place
    check(op, torch.tensor(12, dtype=dtype), torch.tensor(18, dtype=dtype))  # 0-d
    check(op, torch.zeros(0, 4, dtype=dtype), b)  # empty
    check(op, *fibonacci_pairs(dtype))  # the longest runs of Euclid's algorithm
    big = torch.iinfo(dtype).max
    check(op, torch.tensor([big, big, 0, 7], dtype=dtype), torch.tensor([big - 1, 3, 0, 0], dtype=dtype))  # overflow wraps


def test_gcd_lcm_reject_floats_and_bools():
    for op in (torch.gcd, torch.lcm):
        for dtype in (torch.float32, torch.bool):
            x = torch.ones(3, dtype=dtype)
            with pytest.raises(RuntimeError, match="not implemented for"):
                op(x, x)
            # lcm of bools fails in PyTorch's own shape function first, with its message.
            message = None if (op, dtype) == (torch.lcm, torch.bool) else f"aten::{op.__name__} is not implemented for"
            with pytest.raises(RuntimeError, match=message):
                op(x.to("tpu"), x.to("tpu"))
    assert torch.gcd(torch.tensor([4], device="tpu"), torch.tensor([6], device="tpu")).item() == 2


# Signs, powers of two, the largest and smallest normals, subnormals (which
# XLA CPU would flush as floats: read as bits), zeros, infinities and NaN.
FREXP_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.25, 1e-3, 1e30, 65504.0, 6.0e-5, 2.0**-20, 2.0**-126,
                2.0**-130, -(2.0**-140), 1e-300, 5e-310, 2.0**-1074, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_frexp(dtype):
    x = torch.tensor(FREXP_VALUES, dtype=torch.float64).to(dtype)
    exact = dict(rtol=0, atol=0)
    check(torch.frexp, x, **exact)
    check(lambda x: torch.frexp(x.view(3, 7).t()), x, **exact)  # a view
    check(lambda x, m, e: torch.frexp(x, out=(m, e)), x, torch.empty_like(x), torch.empty(21, dtype=torch.int32),
          **exact)
    check(torch.frexp, torch.tensor(-12.5, dtype=dtype), **exact)  # 0-d
    check(torch.frexp, torch.zeros(0, 3, dtype=dtype), **exact)  # empty
    m, e = torch.frexp(x.to("tpu"))
    finite = x.isfinite()
    assert torch.equal(torch.ldexp(m.cpu().double(), e.cpu())[finite], x.double()[finite])


def test_frexp_rejects_integers():
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="frexp"):
            torch.frexp(torch.ones(3, dtype=torch.int32, device=device))


def test_equal():
    """torch.equal: shape and values (NaN never equal), any two dtypes."""
    a = make((3, 4), torch.float32, seed=7)
    t = a.to("tpu")
    for other in [a.clone(), a + 1, a[:2], a.t().contiguous().t(), a.to(torch.float64), a.view(4, 3)]:
        assert torch.equal(t, other.to("tpu")) == torch.equal(a, other)
    nan = torch.tensor([1.0, NAN])
    assert torch.equal(nan.to("tpu"), nan.to("tpu")) == torch.equal(nan, nan) == False  # noqa: E712
    assert torch.equal(torch.zeros(0).to("tpu"), torch.zeros(0).to("tpu"))
    with pytest.raises(RuntimeError, match="equal: expected both tensors on tpu:0, but found one on cpu"):
        torch.equal(t, a)
    assert torch.equal(t, t)  # the process goes on


def same_bits(actual, expected):
    """Equal down to the bit: -0.0 apart from 0.0, each subnormal exact (NaNs
    as NaNs, whatever their payload)."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = actual.isnan()
    assert torch.equal(nan, expected.isnan())
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[expected.element_size()]
    assert torch.equal(actual[~nan].view(ints), expected[~nan].view(ints)), (actual, expected)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter_and_copysign_bit_exact(dtype):
    # Every pair of signed zeros, subnormals, normals, extremes, infinities
    # and NaN; steps onto and off zero, to and from infinity.
    fi = torch.finfo(dtype)
    least = fi.tiny * fi.eps  # the least subnormal
    values = torch.tensor([0.0, -0.0, 1.0, -1.0, 3.5, fi.tiny, -fi.tiny, fi.tiny / 4, least, -least, fi.max, -fi.max,
                           INF, -INF, NAN], dtype=torch.float64).to(dtype)
    x, y = values.repeat_interleave(len(values)), values.repeat(len(values))
    for op in (torch.nextafter, torch.copysign):
        same_bits(op(x.to("tpu"), y.to("tpu")), op(x, y))
        same_bits(op(x.view(15, 15).t().to("tpu"), y[:15].to("tpu")), op(x.view(15, 15).t(), y[:15]))  # a view, broadcast
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    check(lambda a, b: a.nextafter_(b), a, b)
    check(lambda a, b: torch.nextafter(a, b, out=torch.empty_like(a)), a, b)
    check(lambda a, b: a.copysign_(b), a, b)
    check(lambda a: torch.copysign(a, -2), a)  # a Python scalar
    check(torch.copysign, torch.tensor(-2.0, dtype=dtype), torch.zeros(0, 3, dtype=dtype))  # 0-d, empty


def test_copysign_of_integers_and_gradient_and_nextafter_refusing_them():
    check(torch.copysign, torch.arange(-3, 3), torch.tensor([1.0, -0.0, -2.0, 0.0, NAN, -NAN]))  # float result
    check(torch.copysign, torch.arange(-3, 3, dtype=torch.int16), torch.tensor(-1))
    x = make((5,), torch.float32, seed=3).requires_grad_()
    y = make((5,), torch.float32, seed=4)
    check(lambda x, y: torch.autograd.grad(torch.copysign(x, y).sum(), x)[0], x, y)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="nextafter.*not implemented for"):
            torch.nextafter(torch.ones(2, dtype=torch.int32, device=device), torch.zeros(2, dtype=torch.int32, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64])
def test_xlog1py_and_entr(dtype):
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, lo=0, seed=2)
    check(torch.special.xlog1py, a, b)
    check(torch.special.xlog1py, torch.tensor([0.0, 0.0, 0.0, 2.0, -1.0, 1.0]), torch.tensor([-1.0, NAN, INF, -1.0, 3.0, -2.0]))
    check(lambda y: torch.special.xlog1py(2.5, y), b)
    check(lambda x: torch.special.xlog1py(x, 3.0), a)
    if dtype.is_floating_point:
        check(lambda x, y: torch.special.xlog1py(x, y, out=torch.empty_like(x)), a, b)
    check(torch.special.entr, a)
    check(torch.special.entr, torch.tensor([0.0, -0.0, -1.0, 0.5, 1.0, INF, -INF, NAN, 1e-30]))
    check(lambda x: torch.special.entr(x.t(), out=torch.empty(4, 3, device=x.device)), a.float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64])
def test_xlogy(dtype):
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2).abs()
    check(torch.xlogy, a, b)
    check(torch.xlogy, torch.tensor([0.0, 0.0, 0.0, 2.0, -1.0]), torch.tensor([0.0, NAN, INF, 0.0, 3.0]))
    check(lambda y: torch.xlogy(2.5, y), b)        # Scalar_Self
    check(lambda x: torch.xlogy(x, 3.0), a)        # Scalar_Other
    if dtype.is_floating_point:
        check(lambda x, y: x.xlogy_(y), a, b)
        check(lambda x, y: torch.special.xlogy(x, y, out=torch.empty_like(x)), a, b)
    p, q = torch.softmax(make((4, 5), torch.float32, seed=3), 1), torch.log_softmax(make((4, 5), torch.float32, seed=4), 1)
    check(lambda lp, t: torch.nn.functional.kl_div(lp, t, reduction="batchmean"), q, p)


# ---- bitwise / logical ----

BITWISE_DTYPES = INTS + [torch.bool]


@pytest.mark.parametrize("dtype", BITWISE_DTYPES)
def test_bitwise(dtype):
    a, b = make((3, 4), dtype, lo=-100, hi=100, seed=1), make((4,), dtype, lo=-100, hi=100, seed=2)
    for op in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
        check(op, a, b)
    check(lambda x, y: (x & y, x | y, x ^ y), a, b)
    check(torch.bitwise_not, a)
    check(lambda x: ~x, a)
    s = True if dtype == torch.bool else 6
    check(lambda x: (x & s, x | s, x ^ s), a)
    check(lambda x: torch.bitwise_and(s, x), a)  # Scalar_Tensor


@pytest.mark.parametrize("dtype", INTS)
def test_shifts(dtype):
    a = make((8,), dtype, lo=-60, hi=60, seed=1)
    n = torch.tensor([0, 1, 2, 3, 7, 1, 2, 5], dtype=dtype)
    check(lambda x, y: (x << y, x >> y), a, n)
    check(lambda x: (x << 2, x >> 1), a)
    check(lambda x, y: x.__ilshift__(y), a, n)
    check(lambda x: x.__irshift__(2), a)
    check(torch.bitwise_left_shift, a, n)
    check(torch.bitwise_right_shift, a, n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8, torch.bool])
def test_logical(dtype):
    a = make((3, 4), dtype, lo=-2, hi=2, seed=1)
    b = make((4,), dtype, lo=-2, hi=2, seed=2)
    for op in (torch.logical_and, torch.logical_or, torch.logical_xor):
        check(op, a, b)
        check(op, a, make((4,), torch.float64, lo=-1, hi=1))  # mixed dtypes
    check(torch.logical_not, a)
    check(torch.logical_and, torch.tensor([NAN, 0.0, -0.0, 1.0]), torch.tensor([True, True, True, True]))
    check(torch.logical_not, torch.tensor([NAN, 0.0, -0.0, 1.0]))


# ---- comparisons ----

CMP_OPS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("dtype", ALL)
def test_compare(dtype):
    a, b = make((3, 4), dtype, lo=-2, hi=3, seed=1), make((3, 4), dtype, lo=-2, hi=3, seed=2)
    check(lambda x, y: tuple(op(x, y) for op in CMP_OPS), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
@pytest.mark.parametrize("shapes", [((3, 1), (4,)), ((), (2, 2)), ((0, 2), (2,)), ((), ())])
def test_compare_shapes(dtype, shapes):
    a, b = make(shapes[0], dtype, lo=-2, hi=3, seed=1), make(shapes[1], dtype, lo=-2, hi=3, seed=2)
    check(lambda x, y: (x < y, x == y, x >= y), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int8, torch.uint8,
                                   torch.bool])
def test_compare_scalar(dtype):
    a = make((3, 4), dtype, lo=-3, hi=4, seed=1)
    for s in (1, -1, 200):  # one program: the scalar is a runtime value
        check(lambda x: tuple(op(x, s) for op in CMP_OPS), a)
    for s in (0.5, True):
        check(lambda x: (x < s, x == s, x >= s), a)
    check(lambda x: (x < 2, 2 < x, x == 1, x != 1), a)


def test_compare_promotes_and_nan():
    check(lambda x, y: tuple(op(x, y) for op in CMP_OPS), make((5,), torch.int64, seed=1),
          make((5,), torch.float32, seed=2))
    check(lambda x, y: tuple(op(x, y) for op in CMP_OPS), torch.tensor([1.0, NAN, INF, -0.0]),
          torch.tensor([NAN, NAN, INF, 0.0]))
    check(lambda x: tuple(op(x, 2.5) for op in CMP_OPS), make((5,), torch.int32, seed=3))
    check(lambda x: tuple(op(x, 16777217) for op in CMP_OPS), torch.tensor([16777216, 16777217]))


# ---- where ----

@pytest.mark.parametrize("dtype", ALL)
def test_where(dtype):
    cond = make((3, 4), torch.bool, seed=5)
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    check(torch.where, cond, a, b)
    check(lambda c, x, y: x.where(c, y), cond, a, b)
    check(torch.where, make((3, 1), torch.bool, seed=6), a, b)  # broadcast condition
    check(torch.where, cond, make((), dtype), make((), dtype, seed=3))


def test_where_scalars_and_mixed():
    cond = make((2, 5), torch.bool, seed=1)
    x = make((2, 5), torch.float32)
    check(lambda c, x: torch.where(c, x, 0.0), cond, x)
    check(lambda c, x: torch.where(c, 2, x), cond, x)
    check(lambda c: torch.where(c, 1, 0), cond)
    check(lambda c: torch.where(c, 1.5, -1), cond)
    check(lambda c, x: torch.where(c, x, 3), cond, make((2, 5), torch.int32))
    check(torch.where, cond, make((2, 5), torch.int32), make((2, 5), torch.float16))
    check(lambda c, x: torch.where(c > 0, x, -x), make((2, 5), torch.float32, seed=9), x)


# ---- clamp ----

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int8, torch.uint8])
def test_clamp(dtype):
    x = make((4, 5), dtype, lo=-10, hi=10, seed=1)
    check(lambda x: x.clamp(-3, 4), x)
    check(lambda x: x.clamp(min=2), x)
    check(lambda x: x.clamp(max=2), x)
    check(lambda x: torch.clamp_min(x, 1), x)
    check(lambda x: torch.clamp_max(x, 1), x)
    check(lambda x: x.clamp(5, 1), x)  # min > max gives max
    check(lambda x: x.clip(0, 3), x)
    lo, hi = make((5,), dtype, lo=-8, hi=1, seed=2), make((4, 1), dtype, lo=0, hi=8, seed=3)
    check(lambda x, a, b: x.clamp(a, b), x, lo, hi)
    check(lambda x, a: x.clamp(min=a), x, lo)
    check(lambda x, b: x.clamp(max=b), x, hi)
    check(lambda x, a: torch.clamp_min(x, a), x, lo)
    check(lambda x, b: torch.clamp_max(x, b), x, hi)


def test_clamp_promotes_and_nan():
    check(lambda x: x.clamp(0.5, 2.5), make((6,), torch.int32))  # -> float32
    check(lambda x: x.clamp(-1.0, 1.0), torch.tensor([NAN, -INF, INF, 0.5]))
    check(lambda x: x.clamp(min=NAN), torch.tensor([0.5, 1.0]))
    check(lambda x, b: x.clamp(max=b), torch.tensor([1.0, 2.0, 3.0]), torch.tensor([NAN, 1.0, 5.0]))


# ---- casts ----

CAST_SRC = torch.tensor([0.0, 1.7, -1.7, 2.5, -2.5, 126.9, -127.9, 200.0, -1.0, 300.7, -129.5, 65535.0])


@pytest.mark.parametrize("dst", ALL)
@pytest.mark.parametrize("src", FLOATS)
def test_cast_from_float(src, dst):
    x = CAST_SRC.to(src)
    if not dst.is_floating_point and dst != torch.bool:
        x = x[(x.to(torch.float64) > -2.0**31) & (x.to(torch.float64) < 2.0**31)]
    check(lambda x: x.to(dst), x)


@pytest.mark.parametrize("dst", ALL)
@pytest.mark.parametrize("src", INTS + [torch.bool])
def test_cast_from_int(src, dst):
    check(lambda x: x.to(dst), make((3, 5), src, lo=-120, hi=120, seed=1))


def test_cast_methods_and_specials():
    x = torch.tensor([NAN, 0.0, -0.0, INF, -INF, 0.25, -3.75])
    check(lambda x: x.bool(), x)
    check(lambda x: x.half(), x)
    check(lambda x: x.bfloat16(), x)
    check(lambda x: x.double(), x)
    check(lambda x: x[4:].int(), x)
    check(lambda x: x[4:].long(), x)
    check(lambda x: x.float(), make((2, 3), torch.int64))
    check(lambda x: x.float(), make((2, 3), torch.bool))
    check(lambda x: x.to(torch.float16), torch.tensor([70000.0, 1e-8, 65504.0]))
    check(lambda x: x.t().to(torch.int32), make((3, 4), torch.float32, lo=-50, hi=50))  # non-contiguous


def test_copy_between_dtypes():
    def fn(dst, src):
        dst.copy_(src)
        return dst
    check(fn, torch.zeros(3, 4, dtype=torch.int8), make((3, 4), torch.float32, lo=-200, hi=200))
    check(fn, torch.zeros(3, 4, dtype=torch.float16), make((4,), torch.int64))  # broadcast src
    check(fn, torch.zeros(3, 4, dtype=torch.bool), make((3, 4), torch.float32))
    check(lambda d, s: d[:, 1:3].copy_(s), torch.zeros(3, 4), make((3, 2), torch.int32))


# ---- unary math ----

# (op, domain lo, hi): inputs drawn from where the op is defined.
FLOAT_UNARY = [
    (torch.exp, -5, 5), (torch.exp2, -5, 5), (torch.expm1, -3, 3), (torch.log, 0.01, 10),
    (torch.log2, 0.01, 10), (torch.log10, 0.01, 10), (torch.log1p, -0.9, 10), (torch.sqrt, 0, 10),
    (torch.rsqrt, 0.01, 10), (torch.reciprocal, 0.1, 5), (torch.sin, -6, 6), (torch.cos, -6, 6),
    (torch.tan, -1.5, 1.5), (torch.asin, -1, 1), (torch.acos, -1, 1), (torch.atan, -10, 10),
    (torch.sinh, -5, 5), (torch.cosh, -5, 5), (torch.tanh, -5, 5), (torch.asinh, -20, 20),
    (torch.acosh, 1, 20), (torch.atanh, -0.99, 0.99), (torch.sigmoid, -10, 10),
    (torch.erf, -4, 4), (torch.erfc, -4, 4), (torch.erfinv, -1, 1), (torch.lgamma, -4.5, 12),
    (torch.digamma, 0.05, 12), (torch.sinc, -4, 4),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op,lo,hi", FLOAT_UNARY, ids=[o[0].__name__ for o in FLOAT_UNARY])
def test_float_unary(op, lo, hi, dtype):
    check(op, make((4, 6), dtype, lo=lo, hi=hi, seed=7))


@pytest.mark.parametrize("op,lo,hi", FLOAT_UNARY, ids=[o[0].__name__ for o in FLOAT_UNARY])
def test_float_unary_of_ints(op, lo, hi):
    ilo, ihi = int(max(lo, -3)), int(min(hi, 4))
    if ihi > ilo:
        check(op, make((7,), torch.int32, lo=ilo, hi=ihi))  # int -> float32 result
    if lo <= 0 and hi >= 1:
        check(op, make((7,), torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log1p_within_two_ulps_of_the_cpu(dtype):
    """XLA's log1p was 120 ulps off in float64 on [-0.5, -0.3]; ours is the
    log of 1 + x corrected by its rounding (hlo_log1p), which keeps -0.0."""
    x = torch.cat([torch.linspace(-0.999, 3, 20001, dtype=dtype), torch.tensor([-0.0, 0.0, 1e-30], dtype=dtype)])
    got, expected = torch.log1p(x.to("tpu")).cpu(), torch.log1p(x)
    ulps = (got - expected).abs() / (torch.finfo(dtype).eps * expected.abs().clamp_min(torch.finfo(dtype).tiny))
    assert ulps.max().item() <= 2
    assert torch.equal(got[-3:].signbit(), expected[-3:].signbit())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lgamma_within_ulps_of_the_cpu(dtype):
    """XLA's lgamma was 147 ulps off in float32 near its zeros at 1 and 2;
    ours (hlo_log_gamma) follows glibc's pieces. Relative to the value on
    the positive axis; on the negative one relative to max(|value|, 1), as
    near its zeros there both sides lose the digits that cancel. Measured:
    3.1 ulps on the positive axis, 7.5 on the negative one."""
    x = torch.cat([torch.linspace(-30, 40, 70001, dtype=torch.float64), torch.tensor([1e-30, 3e5, 1e300])]).to(dtype)
    got, expected = torch.lgamma(x.to("tpu")).cpu(), torch.lgamma(x)
    finite = expected.isfinite()
    assert torch.equal(got[~finite], expected[~finite])  # +inf at the poles
    scale = torch.where(x > 0, expected.abs(), expected.abs().clamp_min(1)).clamp_min(torch.finfo(dtype).tiny)
    ulps = (got - expected)[finite].abs() / (torch.finfo(dtype).eps * scale[finite])
    assert ulps[(x > 0)[finite]].max().item() <= 4
    assert ulps.max().item() <= 10


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_digamma_within_ulps_of_the_cpu(dtype):
    """digamma by the CPU kernel's method (hlo_digamma), where XLA's was
    5,000 ulps off near its zero at 1.4616 and 5e14 near a pole in float64.
    float64 within an ulp of the value; float32 within 4 ulps of max(|value|,
    1), as near the zero XLA's float32 log and glibc's round apart (measured
    445 ulps of the value there, 2e-7 absolute)."""
    x = torch.cat([torch.linspace(-30, 40, 70001, dtype=torch.float64),
                   torch.tensor([0.0, -0.0, -1.0, -3.0, 1e-30, 1e20, -1e20, INF, -INF, NAN])]).to(dtype)
    got, expected = torch.digamma(x.to("tpu")).cpu(), torch.digamma(x)
    finite = expected.isfinite()
    assert torch.equal(got[~finite].nan_to_num(), expected[~finite].nan_to_num())  # +-inf at +-0, NaN at poles
    assert torch.equal(got[~finite].isnan(), expected[~finite].isnan())
    scale = expected.abs() if dtype == torch.float64 else expected.abs().clamp_min(1)
    ulps = (got - expected)[finite].abs() / (torch.finfo(dtype).eps * scale[finite])
    assert ulps.max().item() <= (1 if dtype == torch.float64 else 4)


@pytest.mark.parametrize("op", [torch.exp, torch.erf, torch.atanh, torch.sinh], ids=lambda o: o.__name__)
def test_float_unary_views_and_0d(op):
    check(op, make((), torch.float32, lo=-0.9, hi=0.9))
    check(lambda x: op(x.t()), make((3, 5), torch.float32, lo=-0.9, hi=0.9))
    check(lambda x: op(x[:, 1::2]), make((3, 5), torch.float16, lo=-0.9, hi=0.9))


def test_unary_special_values():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e-20, -1e-20, 1e-3, 0.5, 30.0, 88.5, -88.5])
    x64 = x.double()
    for op, _, _ in FLOAT_UNARY:
        check(op, x)
        check(op, x64)
    big = torch.tensor([1e10, -1e10, 1e30, 3e38, -3e38])
    for op in (torch.asinh, torch.acosh, torch.atanh, torch.sinh, torch.cosh, torch.erf, torch.erfc):
        check(op, big)


def test_erf_accuracy():
    """Relative error far into erfc's tail (erfcx(x) exp(-x^2), the latter
    split so that x^2 does not round): measured float64 5.7e-14 (erfc near
    25, 1e-280) and 2.4e-16 (erf), float32 3.9e-6 (erfc near 8, 1e-30:
    XLA's float32 exp) and 1.9e-7 (erf)."""
    x = torch.linspace(-6, 26, 4001, dtype=torch.float64)
    check(torch.erf, x, rtol=1e-15, atol=0)
    check(torch.erfc, x, rtol=2e-13, atol=0)
    x = torch.linspace(-6, 9, 2001)
    check(torch.erf, x)
    check(torch.erfc, x, rtol=1e-5, atol=0)


def test_erfinv_accuracy():
    # Measured worst relative errors: float32 3e-7 (the default tolerance
    # covers it), float64 8.8e-16.
    y = torch.cat([torch.linspace(-1, 1, 20001, dtype=torch.float64),
                   torch.tensor([1e-30, -1e-10, 0.5, 0.50001, 0.9999, 1 - 2**-24, -(1 - 2**-24), 1 - 1e-12])])
    check(torch.erfinv, y, rtol=4e-15, atol=0)
    check(torch.erfinv, y.float())
    check(lambda t: t.erfinv_(), y.float())
    check(lambda t: torch.erfinv(t, out=torch.empty_like(t)), y[::7].float())


def test_gamma_functions_across_their_domain():
    # Negative non-integers (between the poles), the poles themselves, tiny
    # and large values; polygamma's orders 0 to 5, as the CPU computes them
    # (trigamma's series, zeta's sum in float64, where XLA's polygamma is
    # 1e-10 off in float64 and wrong at x = -8.4784 or -50.5): float64
    # within 1e-13, float32 within 1e-6 (relative).
    x = torch.cat([torch.linspace(-5.75, -0.25, 23, dtype=torch.float64),
                   torch.tensor([-3.0, -1.0, 0.0, 1e-8, 0.5, 1.0, 2.0, 1e3, 1e6, -8.4784, -50.5, -0.001, 1.4616])])
    between_poles = x != x.round()
    for dtype, tol in ((torch.float64, 1e-13), (torch.float32, 1e-6)):
        check(torch.lgamma, x.to(dtype), rtol=1e-5, atol=1e-5)
        check(torch.digamma, x[x > 0].to(dtype), rtol=1e-5, atol=1e-5)
        for n in range(1, 6):
            check(lambda t: torch.polygamma(n, t), x[between_poles | (x == 0)].to(dtype), rtol=tol, atol=0)
            check(lambda t: torch.polygamma(n, t), x[x > 0].to(dtype), rtol=tol, atol=0)
    # at the negative poles trigamma is a huge finite number, as on the CPU
    # (sin(pi x) is not exactly 0), the higher orders infinite
    for dtype in (torch.float64, torch.float32):
        poles = torch.tensor([-7.0, -3.0, -1.0], dtype=dtype)
        assert check(lambda t: torch.polygamma(1, t), poles, rtol=1e-4, atol=0).isfinite().all()
        check(lambda t: torch.polygamma(2, t), poles)
    check(lambda t: torch.special.gammaln(t), x.float(), rtol=1e-5, atol=1e-5)
    check(lambda t: t.lgamma_(), x[x > 0].float(), rtol=1e-5, atol=1e-5)
    check(lambda t: torch.mvlgamma(t, p=3), x[x > 1.5].float(), rtol=1e-5, atol=1e-5)
    # A distribution's log_prob, as torch.distributions computes it.
    rate = torch.tensor([0.5, 2.0, 7.0])
    check(lambda r, k: torch.distributions.Poisson(r).log_prob(k), rate, torch.tensor([0.0, 3.0, 5.0]), rtol=1e-5,
          atol=1e-5)
    check(lambda c: torch.distributions.Dirichlet(c).entropy(), torch.tensor([[0.5, 1.5, 3.0]]), rtol=1e-5, atol=1e-5)


def test_trunc_normal_init_on_the_device():
    # nn.init.trunc_normal_ draws uniforms and maps them through erfinv.
    torch.tpu.manual_seed(0)
    w = torch.nn.init.trunc_normal_(torch.empty(200_000, device="tpu"), std=0.02, a=-0.04, b=0.04).cpu()
    assert w.min() >= -0.04 and w.max() <= 0.04
    assert abs(w.mean().item()) < 3e-4
    # A normal truncated at 2 sigma has 0.8796 sigma.
    assert abs(w.std().item() / (0.8796 * 0.02) - 1) < 0.01


SAME_DTYPE_UNARY = [torch.neg, torch.abs, torch.sign, torch.sgn, torch.floor, torch.ceil, torch.round,
                    torch.trunc]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int8])
@pytest.mark.parametrize("op", SAME_DTYPE_UNARY, ids=lambda o: o.__name__)
def test_same_dtype_unary(op, dtype):
    check(op, make((3, 7), dtype, lo=-10, hi=10, seed=2))


def test_same_dtype_unary_special():
    x = torch.tensor([NAN, INF, -INF, -0.0, 0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7])
    for op in SAME_DTYPE_UNARY + [torch.frac]:
        check(op, x)
        check(op, x.double())
    check(torch.frac, make((3, 4), torch.bfloat16, lo=-10, hi=10))
    check(torch.abs, torch.tensor([-128, 127, 0], dtype=torch.int8))
    check(torch.sign, make((5,), torch.uint8, hi=3))
    check(torch.sign, make((5,), torch.bool))
    check(torch.abs, make((5,), torch.uint8))
    check(torch.neg, make((5,), torch.uint8))


@pytest.mark.parametrize("decimals", [1, 2, -1, -2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_round_decimals(decimals, dtype):
    x = torch.tensor([1.2345, -1.2355, 0.5, 15.0, 25.0, 1234.5678, -49.99, 0.05], dtype=dtype)
    check(lambda x: torch.round(x, decimals=decimals), x)


def test_predicates():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, -NAN, 1e-40])
    for dtype in FLOATS:
        y = x.to(dtype)
        check(lambda t: (torch.isnan(t), torch.isinf(t), torch.isfinite(t), torch.isposinf(t),
                         torch.isneginf(t), torch.signbit(t)), y)
    for dtype in (torch.int32, torch.uint8, torch.bool):
        y = make((6,), dtype)
        check(lambda t: (torch.isnan(t), torch.isinf(t), torch.isfinite(t), torch.isposinf(t),
                         torch.isneginf(t), torch.signbit(t)), y)


def test_isinf_is_one_program():
    # PyTorch's composite kernel (abs, then a compare) would win over the fallback.
    assert programs_run(torch.isinf, torch.tensor([1.0, INF, -INF]).to("tpu")) == 1


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
def test_nan_to_num(dtype):
    x = torch.tensor([NAN, INF, -INF, 1.5, -2.0, 0.0]).to(dtype)
    check(torch.nan_to_num, x)
    check(lambda x: torch.nan_to_num(x, nan=7.0, posinf=100.0, neginf=-100.0), x)
    check(lambda x: torch.nan_to_num(x, posinf=1e6), x)
    check(lambda x: x.nan_to_num_(nan=-1.0), x)


# ---- lerp, addcmul, addcdiv ----

@pytest.mark.parametrize("dtype", FLOATS)
def test_lerp(dtype):
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    for w in (0.0, 0.25, 0.5, 0.75, 1.0, -0.5, 1.5):
        check(lambda x, y: torch.lerp(x, y, w), a, b)
    w = make((3, 1), dtype, lo=-0.5, hi=1.5, seed=3)
    check(torch.lerp, a, b, w)
    check(lambda x, y, w: x.lerp_(y, w), a, b, w)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_addcmul_addcdiv(dtype):
    s, t1 = make((3, 4), dtype, seed=1), make((3, 1), dtype, seed=2)
    t2 = make((4,), dtype, seed=3, nonzero=True)
    v = 0.5 if dtype.is_floating_point else 3
    check(torch.addcmul, s, t1, t2)
    check(lambda s, a, b: torch.addcmul(s, a, b, value=v), s, t1, t2)
    check(lambda s, a, b: s.addcmul_(a, b, value=-2), s, t1, t2)
    if dtype.is_floating_point:
        check(torch.addcdiv, s, t1, t2)
        check(lambda s, a, b: torch.addcdiv(s, a, b, value=v), s, t1, t2)
        check(lambda s, a, b: s.addcdiv_(a, b, value=-2), s, t1, t2)


# ---- fill / zero ----

@pytest.mark.parametrize("dtype", ALL)
def test_fill_zero(dtype):
    x = make((3, 4), dtype)
    check(lambda x: x.zero_(), x)
    check(lambda x: x.fill_(True), x)
    if dtype != torch.bool:
        check(lambda x: x.fill_(-2.75 if dtype.is_floating_point else 7), x)
    check(lambda x, v: x.fill_(v), x, make((), dtype, seed=4))  # fill.Tensor
    if dtype in (torch.float32, torch.int64, torch.bool):
        check(lambda x: x[1].fill_(1), x)
        check(lambda x: x[:, ::2].zero_(), x)


def test_fill_tensor_of_other_dtype_and_runtime_value():
    check(lambda x, v: x.fill_(v), torch.zeros(2, 3), torch.tensor(5, dtype=torch.int64))
    x = torch.zeros(4).to("tpu")
    for v in (1.5, -3.0, 7.25):
        assert_close(x.fill_(v), torch.full((4,), v))


# ---- in-place, out=, views ----

def test_inplace_variants():
    a, b = make((3, 4), torch.float32, seed=1), make((4,), torch.float32, seed=2, nonzero=True)
    check(lambda x, y: x.add_(y), a, b)
    check(lambda x, y: x.sub_(y, alpha=2), a, b)
    check(lambda x, y: x.mul_(y), a, b)
    check(lambda x, y: x.div_(y), a, b)
    check(lambda x, y: x.div_(y, rounding_mode="floor"), a, b)
    check(lambda x, y: x.pow_(2), a, b)
    check(lambda x, y: x.remainder_(y), a, b)
    check(lambda x, y: x.fmod_(2.5), a, b)
    check(lambda x, y: x.clamp_(-1, 1), a, b)
    check(lambda x, y: x.clamp_min_(0), a, b)
    check(lambda x, y: x.exp_(), a, b)
    check(lambda x, y: x.abs_().sqrt_(), a, b)
    check(lambda x, y: x.neg_(), a, b)
    check(lambda x, y: x.round_(decimals=1), a, b)
    check(lambda x, y: x.trunc_(), a, b)
    check(lambda x, y: x.sigmoid_(), a, b)
    check(lambda x, y: x.sign_(), a, b)
    check(lambda x, y: x.lt_(y), a, b)  # result converted back to float
    check(lambda x, y: x.logical_and_(y), a, b)
    i, j = make((3, 4), torch.int32, seed=1), make((3, 4), torch.int32, seed=2, nonzero=True)
    check(lambda x, y: x.add_(y).mul_(3).floor_divide_(y), i, j)
    check(lambda x, y: x.bitwise_xor_(y).bitwise_not_(), i, j)
    check(lambda x: x.add_(2).sub_(1, alpha=3), i)
    check(lambda x, y: x.where(y > 0, 0), i, j)


def test_out_variants():
    a, b = make((3, 4), torch.float32, seed=1), make((3, 4), torch.float32, seed=2, nonzero=True)
    check(lambda x, y: torch.add(x, y, out=torch.empty(3, 4, device=x.device)), a, b)
    check(lambda x, y: torch.mul(x, y, out=torch.empty(3, 4, dtype=torch.float64, device=x.device)), a, b)
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc", out=torch.empty(3, 4, device=x.device)), a, b)
    check(lambda x: torch.exp(x, out=torch.empty(3, 4, device=x.device)), a)
    check(lambda x, y: torch.lt(x, y, out=torch.empty(3, 4, dtype=torch.bool, device=x.device)), a, b)
    check(lambda x, y: torch.lt(x, y, out=torch.empty(3, 4, device=x.device)), a, b)
    check(lambda x: torch.clamp(x, 0, 1, out=torch.empty(3, 4, device=x.device)), a)
    check(lambda x, y: torch.where(x > 0, x, y, out=torch.empty(3, 4, device=x.device)), a, b)
    i = make((3, 4), torch.int32)
    check(lambda x: torch.div(x, 2, out=torch.empty(3, 4, device=x.device)), i)
    check(lambda x: torch.sqrt(x.abs(), out=torch.empty(3, 4, dtype=torch.float64, device=x.device)), i)
    # out= resized from a wrong shape, and out= into a view.
    check(lambda x, y: torch.sub(x, y, out=torch.empty(0, device=x.device)), a, b)

    def into_view(x, y):
        o = torch.zeros(4, 6, device=x.device)
        torch.mul(x, y, out=o[1:, ::2].t().t())
        return o
    check(into_view, make((3, 3), torch.float32, seed=3), make((3, 3), torch.float32, seed=4))


def test_noncontiguous_inputs():
    a, b = make((4, 6), torch.float32, seed=1), make((6, 4), torch.float32, seed=2)
    check(lambda x, y: x.t() + y, a, b)
    check(lambda x, y: x[:, ::2] * y[::2].t(), a, b)
    check(lambda x: torch.exp(x.t()), a)
    check(lambda x: torch.where(x.t() > 0, x.t(), 0.0), a)
    check(lambda x: x[1:, 2:].clamp(-0.5, 0.5), a)
    check(lambda x: x.expand(3, 4, 6) - x[0], a)  # stride-0 input
    check(lambda x, y: torch.maximum(x.unsqueeze(0), y.t().unsqueeze(1)), a, b)
    check(lambda x: x[:, 1].to(torch.int32), make((4, 6), torch.float32, lo=-20, hi=20))


def test_writes_through_views():
    x = make((4, 6), torch.float32, seed=1)
    check(lambda x: x[:, 1].mul_(2), x)
    check(lambda x: x.t().add_(1), x)
    check(lambda x: x[::2, 1::2].clamp_(-0.2, 0.2), x)
    check(lambda x: x[1].exp_(), x)
    check(lambda x, y: x[:, :4].t().sub_(y), x, make((4, 4), torch.float32, seed=2))
    check(lambda x: x.view(6, 4)[2:].neg_(), x)
    check(lambda x: x[2, 3].fill_(9), x)
    i = make((4, 6), torch.int16, seed=3)
    check(lambda x: x[:, ::3].mul_(5).remainder_(7), i)
    check(lambda x: x.t()[1].bitwise_not_(), i)


def test_empty_and_zero_dim_everywhere():
    for shape in ((), (0,), (2, 0, 3)):
        x = make(shape, torch.float32, seed=1)
        check(lambda x: (x + 1, x * x, x / 2, -x, x.exp(), x < 0, torch.where(x > 0, x, 0.0),
                         x.clamp(0, 1), x.to(torch.int32), torch.isnan(x), x.round(decimals=1)), x)
        check(lambda x: x.add_(1), x)
