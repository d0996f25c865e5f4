"""Creation and random ops on tpu: arange, linspace, eye, zeros/ones/full
and *_like against PyTorch's CPU results; random ops for reproducibility
under torch.manual_seed and for their distributions (100k samples; bounds
are a few standard errors wide)."""
import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]
TPU = "tpu"
N = 100_000


# ---- arange / linspace / eye ----


@pytest.mark.parametrize("args", [(5,), (2, 9), (1, 10, 3), (5, -3, -2), (0.0, 1.0, 0.1), (-1, 1, 0.25),
                                  (0,), (3, 3), (1.5, 7), (-2.5, 2.5, 0.5)])
def test_arange(args):
    assert_close(torch.arange(*args, device=TPU), torch.arange(*args))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32, torch.float64])
def test_arange_dtypes(dtype):
    assert_close(torch.arange(0, 20, 3, dtype=dtype, device=TPU), torch.arange(0, 20, 3, dtype=dtype))
    if dtype.is_floating_point:
        assert_close(torch.arange(-1, 1, 0.125, dtype=dtype, device=TPU), torch.arange(-1, 1, 0.125, dtype=dtype))


def test_arange_lengths_and_out():
    # Same signature, different lengths: each call gets its own output shape.
    for n in [3, 7, 3, 1000]:
        assert_close(torch.arange(n, device=TPU), torch.arange(n))
    assert_close(torch.arange(10, 20, device=TPU), torch.arange(10, 20))
    assert_close(torch.arange(0, 1e6, 0.5, device=TPU), torch.arange(0, 1e6, 0.5), rtol=0, atol=0)
    out = torch.zeros(4, dtype=torch.int64, device=TPU)
    torch.arange(4, 8, out=out)
    assert_close(out, torch.arange(4, 8))
    resized = torch.zeros(2, device=TPU)
    torch.arange(0.0, 3.0, 0.5, out=resized)
    assert_close(resized, torch.arange(0.0, 3.0, 0.5))


@pytest.mark.parametrize("args", [(0, 1, 5), (-3, 7, 11), (0, 1, 1), (0, 1, 0), (2, -2, 100), (5, 5, 4),
                                  (-1e3, 1e3, 1001)])
def test_linspace(args):
    assert_close(torch.linspace(*args, device=TPU), torch.linspace(*args))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8,
                                   torch.uint8])
def test_linspace_dtypes(dtype):
    assert_close(torch.linspace(0, 10, 7, dtype=dtype, device=TPU), torch.linspace(0, 10, 7, dtype=dtype))
    assert_close(torch.linspace(1, 100, 50, dtype=dtype, device=TPU), torch.linspace(1, 100, 50, dtype=dtype))


def test_linspace_tensor_ends_and_out():
    s, e = torch.tensor(-2.0), torch.tensor(3.0)
    assert_close(torch.linspace(s.to(TPU), e.to(TPU), 6, device=TPU), torch.linspace(s, e, 6))
    assert_close(torch.linspace(s.to(TPU), 4, 5, device=TPU), torch.linspace(s, 4, 5))
    out = torch.zeros(9, device=TPU)
    torch.linspace(0, 2, 9, out=out)
    assert_close(out, torch.linspace(0, 2, 9))


@pytest.mark.parametrize("args", [(0, 2, 5), (-1, 1, 7, 2.0), (1, 3, 1), (0, 1, 0), (3, -3, 50, 0.5)])
def test_logspace(args):
    assert_close(torch.logspace(*args, device=TPU), torch.logspace(*args))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_logspace_dtypes(dtype):
    assert_close(torch.logspace(0, 3, 4, dtype=dtype, device=TPU), torch.logspace(0, 3, 4, dtype=dtype))
    assert_close(torch.logspace(0, 10, 11, base=2, dtype=dtype, device=TPU),
                 torch.logspace(0, 10, 11, base=2, dtype=dtype))


@pytest.mark.parametrize("args", [(3,), (2, 4), (4, 2), (0,), (1,), (3, 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_eye(args, dtype):
    assert_close(torch.eye(*args, dtype=dtype, device=TPU), torch.eye(*args, dtype=dtype))


def test_eye_out():
    out = torch.ones(3, 3, device=TPU)
    torch.eye(3, out=out)
    assert_close(out, torch.eye(3))


# ---- zeros / ones / full and *_like ----


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_constant_fills(dtype, shape):
    value = True if dtype == torch.bool else 3
    assert_close(torch.zeros(shape, dtype=dtype, device=TPU), torch.zeros(shape, dtype=dtype))
    assert_close(torch.ones(shape, dtype=dtype, device=TPU), torch.ones(shape, dtype=dtype))
    assert_close(torch.full(shape, value, dtype=dtype, device=TPU), torch.full(shape, value, dtype=dtype))
    base = torch.empty(shape, dtype=dtype, device=TPU)
    assert_close(torch.zeros_like(base), torch.zeros(shape, dtype=dtype))
    assert_close(torch.ones_like(base), torch.ones(shape, dtype=dtype))
    assert_close(torch.full_like(base, value), torch.full(shape, value, dtype=dtype))
    assert_close(base.new_zeros((2,)), torch.zeros(2, dtype=dtype))
    assert_close(base.new_full((2,), value), torch.full((2,), value, dtype=dtype))


def test_fill_values_and_views():
    assert_close(torch.full((3,), -2.5, device=TPU), torch.full((3,), -2.5))
    assert_close(torch.full((3,), float("nan"), device=TPU), torch.full((3,), float("nan")))
    assert_close(torch.full((2,), 2**40, device=TPU), torch.full((2,), 2**40))
    assert_close(torch.zeros_like(torch.ones(2, 3, device=TPU), dtype=torch.float16),
                 torch.zeros(2, 3, dtype=torch.float16))
    x = torch.arange(12.0).reshape(3, 4)
    t = x.to(TPU)
    x[:, 1].zero_()
    t[:, 1].zero_()
    x.t()[::2].fill_(7)
    t.t()[::2].fill_(7)
    assert_close(t, x)


# ---- random: reproducibility ----

RANDOM_OPS = {
    "rand": lambda: torch.rand(1000, device=TPU),
    "rand_f64": lambda: torch.rand(50, dtype=torch.float64, device=TPU),
    "randn": lambda: torch.randn(3, 333, device=TPU),
    "randint": lambda: torch.randint(0, 1000, (1000,), device=TPU),
    "rand_like": lambda: torch.rand_like(torch.zeros(10, 10, device=TPU)),
    "randn_like": lambda: torch.randn_like(torch.zeros(100, device=TPU, dtype=torch.bfloat16)),
    "randint_like": lambda: torch.randint_like(torch.zeros(100, device=TPU), 5, 500),
    "uniform_": lambda: torch.empty(1000, device=TPU).uniform_(-3, 3),
    "normal_": lambda: torch.empty(1000, device=TPU).normal_(2, 3),
    "normal_tensor": lambda: torch.normal(torch.zeros(1000, device=TPU), 1.0),
    "bernoulli": lambda: torch.bernoulli(torch.full((1000,), 0.5, device=TPU)),
    "bernoulli_": lambda: torch.empty(1000, device=TPU).bernoulli_(0.5),
    "random_": lambda: torch.empty(1000, dtype=torch.int32, device=TPU).random_(),
    "exponential_": lambda: torch.empty(1000, device=TPU).exponential_(),
    "randperm": lambda: torch.randperm(1000, device=TPU),
    "multinomial": lambda: torch.multinomial(torch.ones(1000, device=TPU), 100),
    "log_normal_": lambda: torch.empty(1000, device=TPU).log_normal_(),
    "cauchy_": lambda: torch.empty(1000, device=TPU).cauchy_(),
    "geometric_": lambda: torch.empty(1000, device=TPU).geometric_(0.2),
}


@pytest.mark.parametrize("name", RANDOM_OPS)
def test_random_reproducible(name):
    fn = RANDOM_OPS[name]
    torch.manual_seed(0)
    a, b = fn().cpu(), fn().cpu()
    torch.manual_seed(0)
    a2, b2 = fn().cpu(), fn().cpu()
    assert torch.equal(a, a2) and torch.equal(b, b2)
    assert not torch.equal(a, b), "successive calls drew the same numbers"
    torch.manual_seed(1)
    assert not torch.equal(fn().cpu(), a), "different seeds drew the same numbers"


def test_random_successive_calls_are_not_shifted_copies():
    # Successive calls advance the generator by one step; their streams
    # must be unrelated, not offset views of one sequence.
    torch.manual_seed(0)
    a, b = torch.rand(4000, device=TPU).cpu(), torch.rand(4000, device=TPU).cpu()
    for shift in range(1, 65):
        assert not torch.equal(a[shift:], b[:-shift])
        assert not torch.equal(b[shift:], a[:-shift])
    limit = 5 / math.sqrt(4000)
    assert abs(torch.corrcoef(torch.stack([a, b]))[0, 1]) < limit
    assert abs(torch.corrcoef(torch.stack([a[:-1], a[1:]]))[0, 1]) < limit


def test_random_generator_object():
    g = torch.Generator(device=TPU)
    g.manual_seed(123)
    a = torch.rand(100, device=TPU, generator=g).cpu()
    torch.manual_seed(5)  # the default generator is another one
    g.manual_seed(123)
    assert torch.equal(torch.rand(100, device=TPU, generator=g).cpu(), a)
    assert not torch.equal(torch.rand(100, device=TPU, generator=g).cpu(), a)
    g.manual_seed(123)
    n1 = torch.randn(100, device=TPU, generator=g).cpu()
    g.manual_seed(123)
    assert torch.equal(torch.randn(100, device=TPU, generator=g).cpu(), n1)


def test_random_into_views_and_edges():
    x = torch.full((4, 6), -7.0, device=TPU)
    x[:, ::2].uniform_(0, 1)
    c = x.cpu()
    assert (c[:, 1::2] == -7).all(), "a random fill of a view wrote outside it"
    assert ((c[:, ::2] >= 0) & (c[:, ::2] < 1)).all()
    y = torch.full((5, 3), -7.0, device=TPU)
    y.t().normal_()
    assert (y.cpu() != -7).all()
    assert torch.rand((), device=TPU).cpu().shape == ()
    assert torch.rand(0, 3, device=TPU).cpu().shape == (0, 3)
    assert torch.randn(0, device=TPU).cpu().shape == (0,)
    assert torch.randint(0, 5, (0,), device=TPU).cpu().shape == (0,)
    assert torch.randperm(0, device=TPU).cpu().shape == (0,)


# ---- random: distributions ----


def uniform_checks(x, low, high, grid=0.0):
    """Bounds, mean, variance and a 10-bin histogram of U[low, high) samples
    (grid: the spacing of representable values, which shifts the mean)."""
    x = x.double()
    n, width = x.numel(), high - low
    assert x.min() >= low and x.max() < high, (x.min().item(), x.max().item())
    assert abs(x.mean() - (low + high - grid) / 2) < 5 * width / math.sqrt(12 * n)
    assert abs(x.var() - width**2 / 12) < 5 * width**2 * math.sqrt((1 / 80 - 1 / 144) / n) + grid * width
    counts = torch.histc(x, bins=10, min=low, max=high)
    assert (abs(counts - n / 10) < 5 * math.sqrt(n * 0.09)).all(), counts


@pytest.mark.parametrize("dtype,grid", [(torch.float32, 2**-24), (torch.float64, 2**-53),
                                        (torch.float16, 2**-11), (torch.bfloat16, 2**-8)])
def test_rand_distribution(dtype, grid):
    torch.manual_seed(0)
    x = torch.rand(N, dtype=dtype, device=TPU).cpu()
    assert x.dtype == dtype
    uniform_checks(x, 0.0, 1.0, grid)


def test_rand_float64_has_more_than_float32_resolution():
    torch.manual_seed(0)
    x = torch.rand(1000, dtype=torch.float64, device=TPU).cpu()
    assert ((x * 2**24) != (x * 2**24).round()).any()


def test_uniform_range():
    torch.manual_seed(0)
    uniform_checks(torch.empty(N, device=TPU).uniform_(-2, 3).cpu(), -2.0, 3.0)
    uniform_checks(torch.empty(N, dtype=torch.float64, device=TPU).uniform_(10, 10.5).cpu(), 10.0, 10.5)


def normal_checks(z):
    """z should be standard normal."""
    z = z.double()
    n = z.numel()
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.std() - 1) < 5 / math.sqrt(2 * n)
    p1 = 0.682689
    assert abs((z.abs() < 1).double().mean() - p1) < 5 * math.sqrt(p1 * (1 - p1) / n)
    assert abs((z > 2).double().mean() - 0.02275) < 5 * math.sqrt(0.02275 / n)
    assert torch.isfinite(z).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_distribution(dtype):
    torch.manual_seed(0)
    x = torch.randn(N, dtype=dtype, device=TPU).cpu()
    assert x.dtype == dtype
    normal_checks(x)


def test_normal_forms():
    torch.manual_seed(0)
    normal_checks((torch.empty(N, device=TPU).normal_(3, 0.5).cpu() - 3) / 0.5)
    normal_checks((torch.normal(2.0, 4.0, size=(N,), device=TPU).cpu() - 2) / 4)
    mean = torch.linspace(-5, 5, N)
    std = torch.linspace(0.5, 2, N)
    normal_checks((torch.normal(mean.to(TPU), 2.0).cpu() - mean) / 2)
    normal_checks(torch.normal(0.0, std.to(TPU)).cpu() / std)
    normal_checks((torch.normal(mean.to(TPU), std.to(TPU)).cpu() - mean) / std)
    out = torch.empty(N, device=TPU)
    torch.normal(mean.to(TPU), std.to(TPU), out=out)
    normal_checks((out.cpu() - mean) / std)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_bernoulli_float_p(p):
    torch.manual_seed(0)
    x = torch.empty(N, device=TPU).bernoulli_(p).cpu()
    assert ((x == 0) | (x == 1)).all()
    assert abs(x.mean() - p) <= 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64, torch.bool])
def test_bernoulli_dtypes_and_tensor_p(dtype):
    torch.manual_seed(0)
    p = torch.linspace(0, 1, N)
    x = torch.empty(N, dtype=dtype, device=TPU).bernoulli_(p.to(TPU)).cpu()
    assert x.dtype == dtype
    x = x.double()
    assert ((x == 0) | (x == 1)).all()
    assert abs(x.mean() - 0.5) < 5 * math.sqrt(1 / 6 / N)
    # Each half follows its own probabilities.
    assert abs(x[: N // 2].mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / (N // 2))
    assert x[0] == 0 and x[-1] == 1


def test_bernoulli_functional():
    torch.manual_seed(0)
    p = torch.full((N,), 0.3, dtype=torch.float64)
    x = torch.bernoulli(p.to(TPU)).cpu()
    assert x.dtype == torch.float64
    assert abs(x.mean() - 0.3) < 5 * math.sqrt(0.21 / N)
    y = torch.bernoulli(torch.zeros(3, 4, device=TPU), 0.7).cpu()
    assert y.shape == (3, 4) and ((y == 0) | (y == 1)).all()


def integer_checks(x, low, high):
    """x should be uniform over the integers [low, high)."""
    x = x.double()
    width = high - low
    assert x.min() >= low and x.max() <= high - 1, (x.min().item(), x.max().item())
    assert (x == x.round()).all()
    assert abs(x.mean() - (low + high - 1) / 2) < 5 * width / math.sqrt(12 * x.numel())
    if width <= 256:  # every value shows up among 100k draws
        assert x.unique().numel() == width


@pytest.mark.parametrize("dtype", INTS + [torch.float32, torch.float64, torch.bfloat16])
def test_randint(dtype):
    torch.manual_seed(0)
    low = 0 if dtype == torch.uint8 else -3
    x = torch.randint(low, 60, (N,), dtype=dtype, device=TPU).cpu()
    assert x.dtype == dtype
    integer_checks(x, low, 60)


def test_randint_large_range():
    torch.manual_seed(0)
    integer_checks(torch.randint(0, 2**40, (N,), device=TPU).cpu(), 0, 2**40)
    integer_checks(torch.randint(-(2**62), 2**62, (N,), device=TPU).cpu(), -(2**62), 2**62)
    integer_checks(torch.randint(7, (N,), device=TPU).cpu(), 0, 7)
    integer_checks(torch.randint_like(torch.zeros(N, dtype=torch.int16, device=TPU), 3, 9).cpu(), 3, 9)


# random_() with no range: [0, max] for integers, [0, 2^mantissa] for floats.
DEFAULT_RANGES = {torch.int8: 2**7, torch.uint8: 2**8, torch.int16: 2**15, torch.int32: 2**31,
                  torch.int64: 2**63, torch.bool: 2, torch.float32: 2**24 + 1, torch.float64: 2**53 + 1,
                  torch.float16: 2**11 + 1, torch.bfloat16: 2**8 + 1}


@pytest.mark.parametrize("dtype", list(DEFAULT_RANGES))
def test_random_default_range(dtype):
    torch.manual_seed(0)
    x = torch.empty(N, dtype=dtype, device=TPU).random_().cpu()
    assert x.dtype == dtype
    integer_checks(x, 0, DEFAULT_RANGES[dtype])


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.float32, torch.float16])
def test_random_from_to(dtype):
    torch.manual_seed(0)
    integer_checks(torch.empty(N, dtype=dtype, device=TPU).random_(-3, 5).cpu(), -3, 5)
    integer_checks(torch.empty(N, dtype=dtype, device=TPU).random_(10).cpu(), 0, 10)


def test_random_from_without_to():
    torch.manual_seed(0)
    integer_checks(torch.empty(N, dtype=torch.int16, device=TPU).random_(100, None).cpu(), 100, 2**15)
    integer_checks(torch.empty(N, dtype=torch.uint8, device=TPU).random_(200, None).cpu(), 200, 256)
    x = torch.empty(N, dtype=torch.int64, device=TPU).random_(-(2**63), None).cpu()
    assert (x < 0).any() and (x > 0).any()


@pytest.mark.parametrize("lambd", [0.5, 1.0, 4.0])
def test_exponential(lambd):
    torch.manual_seed(0)
    x = torch.empty(N, dtype=torch.float64, device=TPU).exponential_(lambd).cpu()
    assert (x >= 0).all() and torch.isfinite(x).all()
    assert abs(x.mean() - 1 / lambd) < 5 / lambd / math.sqrt(N)
    # P(X > 1/lambd) = e^-1
    assert abs((x > 1 / lambd).double().mean() - math.exp(-1)) < 5 * math.sqrt(0.2325 / N)


def test_log_normal():
    torch.manual_seed(0)
    x = torch.empty(N, dtype=torch.float64, device=TPU).log_normal_(0.5, 0.25).cpu()
    assert (x > 0).all()
    normal_checks((x.log() - 0.5) / 0.25)
    y = torch.empty(N, device=TPU).log_normal_().cpu()
    normal_checks((y.log() - 1) / 2)


def test_cauchy():
    torch.manual_seed(0)
    x = torch.empty(N, dtype=torch.float64, device=TPU).cauchy_(2.0, 0.5).cpu()
    # Quartiles of Cauchy(median, sigma) are median -/+ sigma.
    for q, value in [(0.25, 1.5), (0.5, 2.0), (0.75, 2.5)]:
        frac = (x < value).double().mean()
        assert abs(frac - q) < 5 * math.sqrt(q * (1 - q) / N), (q, frac)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_geometric(dtype):
    torch.manual_seed(0)
    p = 0.3
    x = torch.empty(N, dtype=dtype, device=TPU).geometric_(p).cpu().double()
    assert x.min() >= 1 and (x == x.round()).all()
    assert abs(x.mean() - 1 / p) < 5 * math.sqrt((1 - p) / p**2 / N)
    assert abs((x == 1).double().mean() - p) < 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("n", [1, 2, 10, 1000])
def test_randperm(n):
    torch.manual_seed(0)
    p = torch.randperm(n, device=TPU).cpu()
    assert p.dtype == torch.int64
    assert torch.equal(p.sort().values, torch.arange(n))
    f = torch.randperm(n, dtype=torch.float32, device=TPU).cpu()
    assert torch.equal(f.sort().values, torch.arange(n, dtype=torch.float32))


def test_randperm_is_uniform():
    # Position of element 0 over many permutations of 8: uniform over 8 slots.
    torch.manual_seed(0)
    slots = torch.stack([torch.randperm(8, device=TPU).cpu() for _ in range(400)]).argmin(1)
    counts = torch.bincount(slots, minlength=8).double()
    assert (abs(counts - 50) < 5 * math.sqrt(400 * (1 / 8) * (7 / 8))).all(), counts


def test_dropout():
    torch.manual_seed(0)
    x = torch.full((N,), 2.0, device=TPU)
    y = F.dropout(x, 0.25, training=True).cpu()
    kept = y != 0
    assert torch.allclose(y[kept], torch.tensor(2.0 / 0.75))
    assert abs(kept.double().mean() - 0.75) < 5 * math.sqrt(0.75 * 0.25 / N)
    assert torch.equal(F.dropout(x, 0.25, training=False).cpu(), x.cpu())


# ---- multinomial ----

WEIGHTS = torch.tensor([0.1, 0.0, 0.6, 0.3, 2e-3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_multinomial_with_replacement_frequencies(dtype):
    torch.manual_seed(0)
    weights = WEIGHTS * 7  # weights need not sum to 1
    draws = torch.multinomial(weights.to(dtype).to(TPU), N, replacement=True).cpu()
    assert draws.dtype == torch.int64 and draws.shape == (N,)
    p = (weights / weights.sum()).double()
    freq = torch.bincount(draws, minlength=5).double() / N
    bound = 5 * (p * (1 - p) / N).sqrt() + 1e-9  # zero weight: never drawn
    assert ((freq - p).abs() <= bound).all(), (freq, p)


def test_multinomial_without_replacement_draws_in_order():
    # First draws follow p; second draws follow sum_i p_i p_k / (1 - p_i).
    torch.manual_seed(1)
    draws = torch.multinomial(WEIGHTS.expand(N // 10, 5).to(TPU), 2).cpu()
    assert (draws[:, 0] != draws[:, 1]).all() and not (draws == 1).any()
    p = (WEIGHTS / WEIGHTS.sum()).double()
    second = (p[:, None] * p[None, :] / (1 - p[:, None])).fill_diagonal_(0).sum(0)
    n = draws.shape[0]
    for column, expected in ((0, p), (1, second)):
        freq = torch.bincount(draws[:, column], minlength=5).double() / n
        assert ((freq - expected).abs() <= 5 * (expected * (1 - expected) / n).sqrt() + 1e-9).all()
    everything = torch.multinomial(torch.tensor([[1.0, 2.0, 3.0]], device=TPU), 3).cpu()
    assert sorted(everything[0].tolist()) == [0, 1, 2]


def test_multinomial_reproducible_batched_empty_and_out():
    rows = torch.tensor([[1.0, 2, 3, 4], [0, 0, 5, 1]], device=TPU)
    torch.manual_seed(5)
    first = torch.multinomial(rows, 3, replacement=True).cpu()
    torch.manual_seed(5)
    again = torch.multinomial(rows, 3, replacement=True).cpu()
    assert torch.equal(first, again) and first.shape == (2, 3) and (first[1] >= 2).all()
    assert torch.multinomial(rows, 0).cpu().shape == (2, 0)
    out = torch.empty(2, 2, dtype=torch.int64, device=TPU)
    torch.multinomial(rows[:, ::2], 1, generator=torch.Generator(TPU).manual_seed(2), out=out[:, :1])
    assert out[:, 0].cpu().tolist()[1] == 1  # row 2's only nonzero weight among [0, 5] is index 1
