"""igamma / igammac (special.gammainc / gammaincc), the regularized lower and
upper incomplete gamma functions, on tpu against PyTorch's CPU kernels.

One big tensor pair per dtype holds every regime of the CPU's kernel: its
power series of P, its series of Q for small x, its continued fraction of
Q, Temme's asymptotic expansion for large a near x, the boundaries between
them (a = 20 and 200, x = 0.5, 1, 1.1 and a, the Temme band's edges) and
the edge values (0, -0, negatives, infinities, NaN); then shapes, views,
out= and in-place, the half types, promotion, the gradient in x and the
distributions built on them. Few programs, many values each: every new
shape or dtype compiles one.

Tolerances: float64 1e-12 relative (measured worst about 1e-13 for a and x
in [1e-3, 1e3]). float32 2e-6 relative, widened to a few float32 ulps of
M = a |log x| + x + |lgamma(a)| where that is larger: deep in the tails the
result is exp of a sum of terms that large, and the CPU's float32 log and
lgamma round each to their last bit, as the device's do, not always alike.
Results below the smallest normal number compare absolutely (XLA flushes
subnormals to zero)."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

NAN, INF = float("nan"), float("inf")
S = torch.special
FUNCS = [torch.igamma, torch.igammac]
IDS = ["igamma", "igammac"]


def grid():
    """(a, x) as float64: random pairs over both regimes, the pieces'
    boundaries and the edge values."""
    g = torch.Generator().manual_seed(0)
    rand = lambda n: torch.rand(n, generator=g, dtype=torch.float64)  # noqa: E731
    a = [10 ** (rand(2500) * 6 - 3)]  # a, x log-uniform in [1e-3, 1e3]
    x = [10 ** (rand(2500) * 6 - 3)]
    band = 10 ** (rand(800) * 2 + 1.3)  # a in (20, 2000) with x near a
    a.append(band)
    x.append(band * (1 + (rand(800) - 0.5) * torch.where(band < 200, 0.62, 9.2 / band.sqrt())))
    pairs = []
    for b in [19.99, 20.0, 20.01, 199.9, 200.0, 200.1, 500.0, 1000.0]:  # Temme's edges
        for r in [0.3, 4.5 / math.sqrt(b)]:
            for s in [1 - 1e-9, 1 + 1e-9]:
                pairs += [(b, b * (1 + r * s)), (b, b * (1 - r * s))]
        pairs += [(b, b), (b, math.nextafter(b, INF)), (b, b + 1e-6)]
    for b in [1e-3, 0.1, 0.5, 0.577, 1.0, 1.1, 1.21, 2.0, 3.0]:  # x = 0.5, 1, 1.1 and x = a
        for v in [0.5, 1.0, 1.1, b]:
            pairs += [(b, v), (b, math.nextafter(v, INF)), (b, math.nextafter(v, 0))]
    for v in [0.01, 0.1, 0.3, 0.5]:  # Q's choice -0.4 / log(x) < a below x = 1/2
        c = -0.4 / math.log(v)
        pairs += [(c, v), (c * (1 + 1e-9), v), (c * (1 - 1e-9), v)]
    pairs += [(0.5, 0.55), (0.6, 0.55), (1.2, 1.0909), (1.2, 1.0910)]  # x * 1.1 < a
    edges = [0.0, -0.0, -1.0, -INF, INF, NAN, 1e-3, 0.5, 1.0, 1.1, 20.0, 200.0, 1e3, 1e-300, 1e300]
    pairs += [(p, q) for p in edges for q in edges]
    a.append(torch.tensor([p for p, _ in pairs], dtype=torch.float64))
    x.append(torch.tensor([q for _, q in pairs], dtype=torch.float64))
    return torch.cat(a), torch.cat(x)


def compare(actual, expected, a, x):
    """The module docstring's tolerances, element by element."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    d = expected.dtype
    t, e = actual.double(), expected.double()
    same = (t == e) | (t.isnan() & e.isnan())
    if d == torch.float64:
        allowed = 1e-12 * e.abs() + 1e-300
    else:
        ad, xd = a.double(), x.double()
        m = (ad * xd.log().abs() + xd + torch.lgamma(ad).abs()).nan_to_num(0, 0, 0)
        allowed = torch.maximum(torch.full_like(e, 2e-6), 4 * 2.0 ** -24 * m) * e.abs() + 2e-38
    bad = ~same & ~((t - e).abs() <= allowed)
    assert not bad.any(), "%d mismatches, first: %s" % (
        bad.sum(), [(a[i].item(), x[i].item(), t[i].item(), e[i].item()) for i in bad.nonzero()[:5, 0]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_values_in_every_regime(fn, dtype):
    a, x = grid()
    a, x = a.to(dtype), x.to(dtype)
    # the grid reaches every method of the CPU's kernel
    ratio = (x - a).abs() / a
    temme = ((a > 20) & (a < 200) & (ratio < 0.3)) | ((a > 200) & (ratio < 4.5 / a.sqrt()))
    rest = ~temme & (a > 0) & (x > 0) & a.isfinite() & x.isfinite()
    assert temme.sum() > 500
    assert (rest & (x > 1.1) & (x > a)).sum() > 500  # continued fraction
    assert (rest & (x <= 1.1) & (a < 1)).sum() > 200  # Q's series (for igammac)
    assert (rest & (x < a)).sum() > 500  # P's series
    expected = fn(a, x)
    compare(fn(a.to("tpu"), x.to("tpu")), expected, a, x)
    assert expected.isfinite().sum() > 3000 and ((expected > 1e-6) & (expected < 1 - 1e-6)).sum() > 1500


def test_shapes_broadcasting_and_views():
    g = torch.Generator().manual_seed(1)
    a = torch.rand(4, 6, generator=g) * 30 + 0.1
    x = torch.rand(6, 4, generator=g) * 30
    tol = dict(rtol=2e-6, atol=1e-7)
    check(torch.igamma, a[:, ::2], x.t()[1:2, ::2], **tol)  # strided, transposed, broadcast (1,3) to (4,3)
    check(torch.igammac, a[1, 2].clone(), x[3, 1].clone(), **tol)  # 0-d
    check(torch.igamma, torch.zeros(0, 3), torch.zeros(1, 3))  # empty


def test_out_in_place_and_aliases():
    a = torch.linspace(0.05, 40, 30)
    x = torch.linspace(0.01, 45, 30).flip(0)
    tol = dict(rtol=2e-6, atol=1e-7)
    check(lambda p, q: p[::3].igammac_(q[::3]), a.clone(), x, **tol)  # in place, through a view
    # out= a strided float64 view takes the float32 result; the special_ aliases
    check(lambda p, q, base: S.gammainc(p, q, out=base[:, 1]), a, x, torch.zeros(30, 2, dtype=torch.float64), **tol)
    check(lambda p, q, base: torch.igamma(p, q, out=base[:, 1]), a, x, torch.zeros(30, 2, dtype=torch.float64), **tol)


def test_half_types_and_promotion():
    a = torch.tensor([0.05, 0.5, 1.0, 2.5, 7.0, 30.0, 120.0, 0.0, -1.0, INF, NAN])
    x = torch.tensor([0.02, 0.7, 1.0, 1.5, 9.0, 27.0, 130.0, 1.0, 1.0, 2.0, 1.0])
    # the CPU's float16/bfloat16 kernels compute in float32 and round, as tpu does
    check(torch.igamma, a.half(), x.half())
    check(torch.igammac, a.bfloat16(), x.bfloat16())
    # an integer beside a float promotes to it
    n = torch.tensor([1, 2, 3, 5, 8, 13, 21, 0, -1, 4, 4])
    assert check(torch.igammac, n, x, rtol=2e-6, atol=1e-7).dtype == torch.float32


def test_unsupported_dtypes_are_refused():
    # integers only: the CPU has no kernel (NotImplementedError, a RuntimeError);
    # tpu refuses too, through PyTorch's reference's output check
    n = torch.tensor([1, 2, 3])
    with pytest.raises(RuntimeError):
        torch.igamma(n, n)
    with pytest.raises(RuntimeError):
        torch.igamma(n.to("tpu"), n.to("tpu"))
    z = torch.ones(3, dtype=torch.complex64)
    with pytest.raises(NotImplementedError, match="igamma"):
        torch.igamma(z, z)
    with pytest.raises(NotImplementedError, match="igammac.*complex64"):
        torch.igammac(z.to("tpu"), z.to("tpu"))


def test_gradient_in_x():
    # d/dx = +-exp(-x) x^(a-1) / Gamma(a): PyTorch's formula, built from ops
    # lowered elsewhere; it defines none in a
    a = torch.tensor([0.3, 1.0, 2.5, 8.0, 30.0, 150.0, 0.5, 4.0], dtype=torch.float64)
    x = torch.tensor([0.2, 1.0, 3.0, 6.0, 33.0, 140.0, 0.0, 1e-3], dtype=torch.float64)
    w = torch.linspace(-1, 1, 8, dtype=torch.float64)

    def grads(p, q, weight):
        q = q.detach().requires_grad_()
        return torch.autograd.grad(((torch.igamma(p, q) + 2 * torch.igammac(p, q)) * weight).sum(), q)[0]

    check(grads, a, x, w, rtol=1e-12, atol=1e-300)
    for fn in FUNCS:
        for device in ["cpu", "tpu"]:
            p = a.to(device).requires_grad_()
            with pytest.raises(NotImplementedError, match=f"{fn.__name__}: input"):
                fn(p, x.to(device)).sum().backward()


def test_gamma_and_chi2_cdf():
    conc = torch.tensor([0.5, 1.0, 2.0, 9.0, 40.0])
    rate = torch.tensor([1.0, 0.5, 2.0, 1.5, 0.25])
    value = torch.tensor([0.3, 2.0, 0.9, 5.0, 170.0])

    def cdfs(c, r, v):
        return (torch.distributions.Gamma(c, r).cdf(v), torch.distributions.Chi2(c * 2).cdf(v))

    check(cdfs, conc, rate, value, rtol=2e-6, atol=1e-7)
