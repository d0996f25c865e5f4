"""Orthogonal polynomials of torch.special on tpu against PyTorch's CPU
kernels: Chebyshev T/U/V/W and their shifted forms, Hermite H and He,
Laguerre L and Legendre P. n from negative through 0, 1, the small degrees
and past the trigonometric shortcut (n > 4, 6 or 8) to 40, fractional and
non-finite n; x at the interval's ends, inside, outside and NaN; float32,
float64 and integer inputs; 0-d, empty, non-contiguous and broadcast
shapes; the x_scalar and n_scalar overloads and out=."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import check, programs_run  # noqa: E402

import torch_tpu.metrics  # noqa: E402

S = torch.special
NAN, INF = float("nan"), float("inf")
CHEBYSHEV = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
             "chebyshev_polynomial_w"]
SHIFTED = ["shifted_" + name for name in CHEBYSHEV]
OTHERS = ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
ALL = CHEBYSHEV + SHIFTED + OTHERS

# The recurrences match the CPU's to the last bit on the XLA CPU plugin;
# the Chebyshev kinds' cos(n acos y) forms differ by XLA's cos/sin/acos not
# being glibc's, an error that grows with n and with the size of the terms.
# So each element gets |tpu - cpu| <= rtol |cpu| + atol s, where s is the
# largest |P_k(x)| for k <= n (at least 1). Worst seen: s-scaled errors of
# 1.5e-5 (float32) and 2.8e-14 (float64), all in the trigonometric forms.
TOLERANCE = {torch.float32: (1.3e-6, 5e-5), torch.float64: (1e-12, 1e-12)}

# x at each polynomial's special points (+-1, 0, 1/2) and around them.
X_POINTS = [-3.0, -1.5, -1.0, -0.999, -0.7, -0.5, -0.2, 0.0, 1e-30, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 1.0, 1.2,
            2.0, NAN, INF, -INF]
N_POINTS = [-5, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 20, 33, 40]


def term_scale(fn, x, n):
    """max(1, |P_k(x)| for k = 0 .. n) per element of the broadcast x, n
    (finite terms only), in float64."""
    x, n = torch.broadcast_tensors(x.double(), n.double())
    top = int(n.nan_to_num(nan=0, posinf=0, neginf=0).clamp(0, 64).max()) if n.numel() else 0
    ks = torch.arange(0, top + 1, dtype=torch.float64)
    terms = fn(x.unsqueeze(-1), ks).abs()
    terms = torch.where(torch.isfinite(terms) & (ks <= n.unsqueeze(-1)), terms, 0)
    return terms.amax(-1).clamp(min=1) if terms.numel() else torch.ones(x.shape, dtype=torch.float64)


def check_scaled(fn, x, n):
    """fn(x, n) on tpu against the CPU, within TOLERANCE scaled per element."""
    expected = fn(x, n)
    actual = fn(x.to("tpu"), n.to("tpu"))
    assert actual.device.type == "tpu" and actual.dtype == expected.dtype and actual.shape == expected.shape
    actual = actual.cpu()
    rtol, atol = TOLERANCE[expected.dtype]
    assert torch.equal(actual.isnan(), expected.isnan()), "NaN in different places"
    infinite = torch.isinf(expected) | torch.isinf(actual)
    assert torch.equal(actual[infinite], expected[infinite]), "infinities differ"
    finite = torch.isfinite(expected)
    error = (actual.double() - expected.double()).abs()
    bound = rtol * expected.double().abs() + atol * term_scale(fn, x, n)
    worst = (error - bound)[finite]
    assert worst.numel() == 0 or worst.max() <= 0, \
        f"off by {error[finite].max():.3g}; worst excess {worst.max():.3g} over the bound"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ALL)
def test_grid(name, dtype):
    """Every x of X_POINTS against every n of N_POINTS."""
    x = torch.tensor(X_POINTS, dtype=torch.float64).to(dtype).reshape(-1, 1)
    n = torch.tensor(N_POINTS, dtype=torch.float64).to(dtype)
    check_scaled(getattr(S, name), x, n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ALL)
def test_random(name, dtype):
    """Random x over the interval and a little past it, n to 40."""
    g = torch.Generator().manual_seed(3)
    lo = 0.0 if name.startswith("shifted") or name == "laguerre_polynomial_l" else -1.0
    x = (torch.rand(64, 1, generator=g, dtype=torch.float64) * 1.2 + lo - 0.1).to(dtype)
    n = torch.randint(-2, 41, (64, 8), generator=g).to(dtype)
    check_scaled(getattr(S, name), x, n)


@pytest.mark.parametrize("name", CHEBYSHEV + SHIFTED)
def test_next_to_the_ends(name):
    """float32 x one step inside the interval's ends, where cos(t/2) or
    sin(t/2) rounds to 1 and the CPU takes a fixed value instead of the
    trigonometric form (the shifted W kind's is +-1, not 2n + 1)."""
    one_below = float(torch.nextafter(torch.tensor(1.0), torch.tensor(0.0)))
    points = [one_below, -one_below, 2.0 ** -25, 1.0 - 2.0 ** -23]
    x = torch.tensor(points).reshape(-1, 1)
    n = torch.tensor([5.0, 7.0, 9.0, 12.0, 20.0, 40.0])
    check_scaled(getattr(S, name), x, n)


@pytest.mark.parametrize("name", ALL)
def test_n_conversion(name):
    """n is cut toward zero; NaN, inf and values past int64 count as negative."""
    fn = getattr(S, name)
    x = torch.tensor([0.3, -0.6, 1.5, 0.0, 1.0, -1.0])
    for values in ([2.9, -0.5, 7.99, 9.2, NAN, INF], [-INF, 1e20, -1e20, 0.99, -1.0, 1.7]):
        n = torch.tensor(values)
        check(fn, x, n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ALL)
def test_integer_inputs(name):
    """Integer and bool inputs compute in float32, as PyTorch promotes."""
    fn = getattr(S, name)
    x = torch.tensor([[-2], [-1], [0], [1], [3]])
    n = torch.tensor([-1, 0, 1, 2, 5, 9], dtype=torch.int32)
    check(fn, x, n, rtol=1e-4, atol=1e-4)
    check(fn, x.double(), n)
    check(fn, x.to(torch.int8), n.bool(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ALL)
def test_shapes(name):
    """0-d, empty, non-contiguous and broadcast both ways."""
    fn = getattr(S, name)
    g = torch.Generator().manual_seed(5)
    x = torch.rand(4, 6, generator=g, dtype=torch.float64) * 2 - 0.9
    n = torch.randint(-1, 12, (6, 4), generator=g).double()
    check(fn, torch.tensor(0.3, dtype=torch.float64), torch.tensor(9.0, dtype=torch.float64))
    check(fn, torch.empty(0, 3, dtype=torch.float64), torch.empty(1, 3, dtype=torch.float64))
    check(fn, torch.empty(0, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64))
    check(fn, x.t(), n)                    # non-contiguous x
    check(fn, x, n.t())                    # non-contiguous n
    check(fn, x[:, ::2], n[::2, :1].t())   # strided, n broadcast over rows
    check(fn, x[:1], n[:, :1])             # [1, 6] with [6, 1]
    check(fn, torch.tensor(0.4, dtype=torch.float64), n)  # 0-d x against n
    check(fn, x.float(), n.t().double())   # float32 x, float64 n: float64


@pytest.mark.parametrize("name", ALL)
def test_scalar_overloads(name):
    fn = getattr(S, name)
    x = torch.tensor([-1.0, -0.3, 0.0, 0.2, 0.5, 1.0, 1.7])
    n = torch.tensor([-1.0, 0.0, 1.0, 3.0, 7.0, 10.0, 25.0])
    check(lambda v: fn(v, 9), x, rtol=2e-4, atol=2e-4)
    check(lambda v: fn(v, 3.7), x.double())
    check(lambda v: fn(0.5, v), n, rtol=2e-4, atol=2e-4)
    check(lambda v: fn(-1, v), n.double())
    check(lambda v: fn(1, v), n.int(), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", ALL)
def test_out(name):
    fn = getattr(S, name)
    x = torch.tensor([[-1.0, -0.3, 0.0], [0.5, 1.0, 1.7]], dtype=torch.float64)
    n = torch.tensor([2.0, 8.0, 11.0], dtype=torch.float64)
    check(lambda a, b, out: fn(a, b, out=out), x, n, torch.empty(2, 3, dtype=torch.float64))
    check(lambda a, b, out: fn(a, b, out=out), x.float(), n.float(), torch.empty(2, 3), rtol=2e-4, atol=2e-4)
    check(lambda a, out: fn(a, 5, out=out), x, torch.empty(2, 3, dtype=torch.float64))
    check(lambda b, out: fn(0.25, b, out=out), n, torch.empty(3, dtype=torch.float64))
    # out= through a view: a column of a larger tensor.
    check(lambda a, b, out: fn(a[0], b, out=out[:, 1]), x, n, torch.zeros(3, 4, dtype=torch.float64))


def test_against_closed_forms():
    """A few exact values, so a wrong recurrence fails even if the CPU
    kernel changed: T_3(x) = 4x^3 - 3x, H_3(x) = 8x^3 - 12x, L_2(x) =
    (x^2 - 4x + 2) / 2, P_2(x) = (3x^2 - 1) / 2, T_10(0.5) = cos(10 pi / 3)."""
    x = torch.tensor([-2.0, -0.5, 0.3, 3.0], dtype=torch.float64, device="tpu")
    cx = x.cpu()
    torch.testing.assert_close(S.chebyshev_polynomial_t(x, 3).cpu(), 4 * cx ** 3 - 3 * cx)
    torch.testing.assert_close(S.hermite_polynomial_h(x, 3).cpu(), 8 * cx ** 3 - 12 * cx)
    torch.testing.assert_close(S.laguerre_polynomial_l(x, 2).cpu(), (cx ** 2 - 4 * cx + 2) / 2)
    torch.testing.assert_close(S.legendre_polynomial_p(x, 2).cpu(), (3 * cx ** 2 - 1) / 2)
    half = torch.tensor(0.5, dtype=torch.float64, device="tpu")
    assert abs(float(S.chebyshev_polynomial_t(half, 10).cpu()) - (-0.5)) < 1e-12


def test_hermite_degree_limit():
    """Past n = 128 (float32) or 512 (float64) Hermite values are NaN."""
    for dtype, n in ((torch.float32, [127.0, 128.0, 129.0, 600.0]), (torch.float64, [511.0, 512.0, 513.0])):
        x = torch.tensor([[0.01], [0.5]], dtype=dtype)
        nn = torch.tensor(n, dtype=dtype)
        check(S.hermite_polynomial_he, x, nn, rtol=1e-3, atol=1e-3)
        check(S.hermite_polynomial_h, x, nn, rtol=1e-3, atol=1e-3)


def test_unsupported_dtypes_name_the_op():
    """float16, bfloat16 and complex are refused, as the CPU does."""
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.ones(3, dtype=dtype, device="tpu")
        with pytest.raises(NotImplementedError, match="special_chebyshev_polynomial_t"):
            S.chebyshev_polynomial_t(x, x).cpu()
    z = torch.ones(3, dtype=torch.complex64, device="tpu")
    with pytest.raises((NotImplementedError, RuntimeError), match="legendre_polynomial_p"):
        S.legendre_polynomial_p(z, torch.ones(3, device="tpu")).cpu()


def test_bad_shapes_raise():
    x = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError):
        S.laguerre_polynomial_l(x, torch.ones(4, device="tpu")).cpu()


def test_large_n_compiles_once():
    """The loop's bound is a runtime value: new degrees, up to large ones,
    run the same program."""
    x = torch.linspace(-1.5, 1.5, 7, dtype=torch.float64)
    fn = S.legendre_polynomial_p
    tx = x.to("tpu")

    def run(degree):
        n = torch.full((7,), degree, dtype=torch.float64)
        torch.testing.assert_close(fn(tx, n.to("tpu")).cpu(), fn(x, n), rtol=1e-8, atol=1e-8, equal_nan=True)

    run(3.0)  # compiles (fused mode: twice, the first graph also holding
    run(4.0)  # what earlier tests left pending)
    before = torch_tpu.metrics.counters()["compile"]
    for degree in (5.0, 40.0, 300.0, 2000.0):
        run(degree)
    assert torch_tpu.metrics.counters()["compile"] == before
    assert programs_run(fn, tx, torch.full((7,), 50.0, dtype=torch.float64, device="tpu")) == 1
