"""Special functions on tpu against PyTorch's CPU kernels: airy_ai, i0, the modified
Bessel functions (special.i0e/i1/i1e, modified_bessel_*, scaled_modified_
bessel_k*), the Bessel functions of the first and second kind, spherical_
bessel_j0, ndtri, log_ndtr, erfcx and zeta. Random values over each
function's range plus its edge values (0, -0, negatives, +-inf, NaN, the
boundaries between the pieces of its approximation); float32/float64,
float16/bfloat16, integer and bool inputs; 0-d, empty and non-contiguous
tensors; out= and in-place; the gradients PyTorch defines.

Tolerances (rtol, atol): float64 (1e-10, 1e-12) and float32 (2e-6, 1e-6),
both far tighter than the approximations' own error, so a wrong
coefficient, branch or boundary fails; float16/bfloat16 compute in float32
and round, as on the CPU (parity's defaults)."""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

NAN, INF = float("nan"), float("inf")
S = torch.special
TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-6, 1e-6)}
EXP_M2 = math.exp(-2)

# (name, function, random range, edge values: the pieces' boundaries and
# where the CPU returns a special value)
BESSEL_EDGES = [0.0, -0.0, 1e-6, -1e-6, 1e-5, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 5.0, -5.0, 5.0001,
                8.0, -8.0, 8.0001, 20.0, -30.0, 100.0, 700.0, INF, -INF, NAN]
OPS = [
    ("i0", torch.i0, (-30, 30), BESSEL_EDGES),
    ("i0e", S.i0e, (-50, 50), BESSEL_EDGES),
    ("i1", S.i1, (-30, 30), BESSEL_EDGES),
    ("i1e", S.i1e, (-50, 50), BESSEL_EDGES),
    ("modified_bessel_i0", S.modified_bessel_i0, (-30, 30), BESSEL_EDGES),
    ("modified_bessel_i1", S.modified_bessel_i1, (-30, 30), BESSEL_EDGES),
    ("modified_bessel_k0", S.modified_bessel_k0, (0, 30), BESSEL_EDGES),
    ("modified_bessel_k1", S.modified_bessel_k1, (0, 30), BESSEL_EDGES),
    ("scaled_modified_bessel_k0", S.scaled_modified_bessel_k0, (0, 60), BESSEL_EDGES),
    ("scaled_modified_bessel_k1", S.scaled_modified_bessel_k1, (0, 60), BESSEL_EDGES),
    ("bessel_j0", S.bessel_j0, (-40, 40), BESSEL_EDGES),
    ("bessel_j1", S.bessel_j1, (-40, 40), BESSEL_EDGES),
    ("bessel_y0", S.bessel_y0, (0, 40), BESSEL_EDGES),
    ("bessel_y1", S.bessel_y1, (0, 40), BESSEL_EDGES),
    ("spherical_bessel_j0", S.spherical_bessel_j0, (-40, 40), BESSEL_EDGES + [0.4999, 0.50001]),
    ("ndtri", S.ndtri, (0, 1),
     [0.0, 1.0, -0.5, 1.5, 0.5, EXP_M2, 1 - EXP_M2, 0.13, 0.87, math.exp(-32), 1e-20, 1e-300,
      1 - 1e-12, 1e-3, INF, -INF, NAN]),
    ("log_ndtr", S.log_ndtr, (-40, 15),
     [0.0, -1.0, -1.0001, -0.9999, 0.7071, 0.7072, 5.0, 8.0, 12.0, 30.0, -10.0, -30.0, -100.0,
      -1e5, INF, -INF, NAN]),
    ("airy_ai", S.airy_ai, (-10, 30),
     [0.0, -0.0, 1e-300, -2.09, -2.0899, -2.0901, 2.09, 2.0899, 2.0901, 8.3203353, 8.33, 103.892, 103.9, -50.0,
      INF, -INF, NAN]),
    ("erfcx", S.erfcx, (-10, 60),
     [0.0, -0.0, 1e-20, -1e-20, 50.0, 50.0001, 49.999, 1e3, 5e7, 6e7, 1e30, -6.1, -6.0999, -6.1001,
      -26.7, -26.6, -26.8, -1.0, 3.0, INF, -INF, NAN]),
]
IDS = [name for name, *_ in OPS]


def values(rng, edges, dtype, n=400, seed=0):
    """Random values in rng, then the edge values, in dtype."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=torch.float64) * (rng[1] - rng[0]) + rng[0]
    return torch.cat([x, torch.tensor(edges, dtype=torch.float64)]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,fn,rng,edges", OPS, ids=IDS)
def test_values_and_edges(name, fn, rng, edges, dtype):
    rtol, atol = TOL[dtype]
    x = values(rng, edges, dtype)
    out = check(fn, x, rtol=rtol, atol=atol)
    assert out.isfinite().sum() >= 300  # the comparison saw numbers, not only inf/nan


@pytest.mark.parametrize("name,fn,rng,edges", OPS, ids=IDS)
def test_shapes_and_views(name, fn, rng, edges):
    rtol, atol = TOL[torch.float32]
    x = values(rng, [], torch.float32, n=60, seed=1).reshape(5, 12)
    check(fn, x.t(), rtol=rtol, atol=atol)  # transposed
    check(lambda t: fn(t[1:, ::3]), x, rtol=rtol, atol=atol)  # strided slice
    check(fn, x[2, 3].clone(), rtol=rtol, atol=atol)  # 0-d
    check(fn, torch.zeros(0, 3), rtol=rtol, atol=atol)  # empty
    check(fn, x.reshape(3, 2, 10), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,fn,rng,edges", OPS, ids=IDS)
def test_out_and_in_place(name, fn, rng, edges):
    rtol, atol = TOL[torch.float32]
    x = values(rng, edges, torch.float32, n=20, seed=2)
    check(lambda t, out: fn(t, out=out), x, torch.empty_like(x), rtol=rtol, atol=atol)
    # out= a strided view: only its elements change
    check(lambda t, base: fn(t, out=base[:, 1]), x, torch.zeros(x.numel(), 2), rtol=rtol, atol=atol)
    # a float64 out takes the float32 result
    check(lambda t, out: fn(t, out=out), x, torch.empty(x.shape, dtype=torch.float64), rtol=rtol, atol=atol)


def test_i0_in_place():
    x = values((-20, 20), BESSEL_EDGES, torch.float32, n=30)
    check(lambda t: t.i0_(), x, rtol=2e-6, atol=1e-6)
    check(lambda t: t[::2].i0_(), x.clone(), rtol=2e-6, atol=1e-6)  # through a view
    check(lambda t: torch.special.i0(t), x, rtol=2e-6, atol=1e-6)  # the alias


# The CPU has float16/bfloat16 kernels for these four only; for the rest
# tpu computes in float32 and rounds, which the test compares with the CPU's
# float32 result rounded.
HALF_ON_CPU = {"i0", "i0e", "i1", "i1e"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name,fn,rng,edges", OPS, ids=IDS)
def test_half_types(name, fn, rng, edges, dtype):
    # the half type's own range: i0(30) overflows float16 on both sides
    lo, hi = rng
    if dtype == torch.float16 and name in ("i0", "i1", "modified_bessel_i0", "modified_bessel_i1"):
        lo, hi = max(lo, -10), min(hi, 10)
    x = values((lo, hi), [0.0, 0.5, 1.0, -1.0, 2.0, 5.0, 8.0, INF, -INF, NAN], dtype, n=100)
    if name in HALF_ON_CPU:
        check(fn, x)
    else:
        assert_close(fn(x.to("tpu")), fn(x.float()).to(dtype))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8, torch.bool])
@pytest.mark.parametrize("name,fn,rng,edges", OPS, ids=IDS)
def test_integer_and_bool_inputs_promote_to_float(name, fn, rng, edges, dtype):
    if dtype == torch.bool:
        x = torch.tensor([True, False, True])
    elif dtype == torch.uint8:
        x = torch.tensor([0, 1, 2, 5, 8, 9, 40, 255], dtype=dtype)
    else:
        x = torch.tensor([-9, -8, -5, -1, 0, 1, 2, 5, 8, 9, 40, 100], dtype=dtype)
    out = check(fn, x, rtol=2e-6, atol=1e-6)
    assert out.dtype == torch.float32


# ---- zeta ----

ZETA_EDGES = [  # (x, q): the poles, the domain and the series' two regimes
    (1.0, 1.0), (1.0, -2.0), (0.5, 1.0), (0.0, 2.0), (-1.0, 2.0), (2.0, 0.0), (3.0, -1.0),
    (2.0, -2.5), (3.0, -2.5), (2.5, -2.5), (2.5, -3.0), (2.0, 1.0), (4.0, 1.0), (1.0001, 1.0),
    (30.0, 1.0), (100.0, 0.5), (2.0, 1e5), (2.0, 1e-3), (2.0, INF), (INF, 2.0), (INF, 0.5),
    (NAN, 1.0), (2.0, NAN), (2.0, 9.0), (2.0, 9.5), (12.0, 3.0),
    (3.0, -8.4784), (5.0, -50.5), (4.0, -1000.25),  # q far below 0: terms of both signs cancel
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta_values_and_edges(dtype):
    rtol, atol = TOL[dtype]
    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.rand(300, generator=g, dtype=torch.float64) * 20 + 1,
                   torch.tensor([e[0] for e in ZETA_EDGES], dtype=torch.float64)]).to(dtype)
    q = torch.cat([torch.rand(300, generator=g, dtype=torch.float64) * 30 - 5,
                   torch.tensor([e[1] for e in ZETA_EDGES], dtype=torch.float64)]).to(dtype)
    out = check(S.zeta, x, q, rtol=rtol, atol=atol)
    assert out.isfinite().sum() >= 200


def test_zeta_broadcast_scalars_and_dtypes():
    rtol, atol = TOL[torch.float32]
    x = torch.linspace(1.5, 6, 12).reshape(3, 4)
    q = torch.linspace(0.5, 4, 4)
    check(S.zeta, x, q, rtol=rtol, atol=atol)  # broadcast
    check(S.zeta, x[:, :1], q.reshape(1, 4), rtol=rtol, atol=atol)  # both ways
    check(S.zeta, x.t(), torch.tensor(2.5), rtol=rtol, atol=atol)  # view and 0-d
    check(S.zeta, torch.zeros(0, 4) + 2, q, rtol=rtol, atol=atol)  # empty
    check(lambda a: S.zeta(2.0, a), q, rtol=rtol, atol=atol)  # Python scalar x
    check(lambda a: S.zeta(a, 3.0), x, rtol=rtol, atol=atol)  # Python scalar q
    check(S.zeta, torch.tensor([2, 3, 4]), torch.tensor([1, 2, 3]), rtol=rtol, atol=atol)  # ints: float32
    check(S.zeta, torch.tensor([2, 3, 4]), q[:3].double(), rtol=1e-10, atol=1e-12)  # int with float64
    # no float16 kernel on the CPU: tpu computes in float32 and rounds
    assert_close(S.zeta(x.half().to("tpu"), q.half().to("tpu")), S.zeta(x.half().float(), q.half().float()).half())
    check(S.zeta, x.double(), q, rtol=1e-10, atol=1e-12)
    check(lambda a, b, out: S.zeta(a, b, out=out), x, q, torch.empty(3, 4), rtol=rtol, atol=atol)


# ---- gradients ----

GRAD_OPS = [
    ("i0", torch.i0, (-10, 10)),
    ("i0e", S.i0e, (-20, 20)),
    ("i1", S.i1, (-10, 10)),
    ("i1e", S.i1e, (-20, 20)),
    ("ndtri", S.ndtri, (0.001, 0.999)),
    ("log_ndtr", S.log_ndtr, (-20, 10)),
    ("erfcx", S.erfcx, (-5, 30)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,fn,rng", GRAD_OPS, ids=[g[0] for g in GRAD_OPS])
def test_gradients(name, fn, rng, dtype):
    x = values(rng, [0.0] if rng[0] < 0 else [], dtype, n=50, seed=4)  # 0: i1's special case
    w = values((-1, 1), [0.5] if rng[0] < 0 else [], dtype, n=50, seed=5)

    def grad(t, weight):
        t = t.detach().requires_grad_()
        return torch.autograd.grad((fn(t) * weight).sum(), t)[0]

    rtol, atol = (1e-9, 1e-11) if dtype == torch.float64 else (1e-5, 1e-5)
    check(grad, x, w, rtol=rtol, atol=atol)


def test_zeta_gradient_in_q():
    # d/dq zeta(x, q) = -x zeta(x + 1, q); PyTorch defines none in x
    x, q = torch.linspace(1.5, 5, 8), torch.linspace(0.5, 6, 8)

    def grad(a, b):
        b = b.detach().requires_grad_()
        return torch.autograd.grad(S.zeta(a, b).sum(), b)[0]

    check(grad, x, q, rtol=2e-6, atol=1e-6)


def test_chained_ops_in_one_program():
    # several functions and arithmetic in one expression (one fused program
    # in fused mode)
    x = torch.linspace(0.1, 9.9, 40)
    check(lambda t: S.i0e(t) * S.bessel_j0(t) + S.modified_bessel_k1(t) - S.erfcx(-t / 4) + S.ndtri(t / 10),
          x, rtol=2e-6, atol=2e-6)


def test_compiled():
    def f(t):
        return S.i1e(t) + S.bessel_y1(t.abs() + 0.1) * S.log_ndtr(t) + S.zeta(t.abs() + 1.5, 2.0)

    x = torch.linspace(-6, 6, 25)
    compiled = torch.compile(f, backend="tpu")
    assert_close(compiled(x.to("tpu")), f(x), rtol=2e-6, atol=2e-6)


def test_complex_input_is_refused_naming_the_op():
    x = torch.ones(3, dtype=torch.complex64).to("tpu")
    for fn, name in [(S.i0e, "special_i0e"), (S.bessel_j0, "special_bessel_j0"), (S.erfcx, "special_erfcx")]:
        with pytest.raises((RuntimeError, NotImplementedError), match=name):
            fn(x)
    ok = torch.linspace(-1, 1, 5)
    assert_close(S.i0e(ok.to("tpu")), S.i0e(ok))  # the process keeps working
