"""Matrix products on tpu against PyTorch's CPU results: mm, bmm, matmul (all
its shape cases), dot, vdot, mv, outer, addmm, addmv, baddbmm, addbmm, addr,
linear and nn.Linear; the cross product (linalg.cross, torch.cross);
Cholesky, triangular solves (cholesky_solve, cholesky_inverse and the older
triangular_solve and cholesky too), LU (factor, P/L/U, solve, inv, det, slogdet),
QR, least squares (lstsq), the matrix exponential, cdist and pdist. The
factorizations and solves take complex matrices too.

Float32 products compare with rtol 1e-5 / atol 1e-5 (scaled for long
contractions): XLA and the CPU BLAS sum in different orders."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from parity import check  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 6, shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def tol(dtype, k=16):
    """(rtol, atol) for a product summing k terms, or the parity defaults."""
    if dtype == torch.float32:
        return dict(rtol=1e-5, atol=1e-5 * max(1.0, k / 64))
    return {}


F32 = tol(torch.float32)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_mm_bmm_dtypes(dtype):
    a, b = make((3, 8), dtype), make((8, 5), dtype, seed=1)
    check(lambda a, b: torch.mm(a, b), a, b, **tol(dtype))
    c, d = make((2, 3, 8), dtype), make((2, 8, 5), dtype, seed=1)
    check(lambda c, d: torch.bmm(c, d), c, d, **tol(dtype))


def test_integer_overflow_wraps():
    a = torch.full((2, 40), 100, dtype=torch.int8)
    check(lambda a: a @ a.t(), a)
    b = torch.full((2, 3), 2**40, dtype=torch.int64)
    check(lambda b: b @ b.t(), b)


@pytest.mark.parametrize("k", [1, 64, 512])
def test_mm_long_contraction(k):
    a, b = make((16, k), torch.float32), make((k, 24), torch.float32, seed=1)
    check(lambda a, b: a @ b, a, b, **tol(torch.float32, k))


@pytest.mark.parametrize("shapes", [
    ((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((4, 5), (5, 3)),
    ((2, 4, 5), (5,)), ((5,), (2, 5, 3)), ((2, 4, 5), (5, 3)), ((4, 5), (2, 5, 3)),
    ((2, 1, 4, 5), (3, 5, 2)), ((3, 2, 4, 5), (3, 2, 5, 6)),
])
def test_matmul_shapes(shapes):
    a, b = make(shapes[0], torch.float32), make(shapes[1], torch.float32, seed=1)
    check(lambda a, b: torch.matmul(a, b), a, b, **F32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int32])
def test_matmul_dtypes(dtype):
    a, b = make((2, 4, 5), dtype), make((5,), dtype, seed=1)
    check(lambda a, b: a @ b, a, b)
    check(lambda a, b: b @ a.transpose(1, 2), a, b)


def test_empty_products():
    check(lambda a, b: a @ b, torch.randn(0, 4), torch.randn(4, 5))
    check(lambda a, b: a @ b, torch.randn(3, 0), torch.randn(0, 5))  # zeros
    check(lambda a, b: torch.bmm(a, b), torch.randn(0, 3, 4), torch.randn(0, 4, 2))
    check(lambda a, b: torch.dot(a, b), torch.randn(0), torch.randn(0))
    check(lambda c, a, b: torch.addmm(c, a, b, beta=2), torch.randn(3, 5), torch.randn(3, 0),
          torch.randn(0, 5))


def test_non_contiguous_operands():
    a, b = make((8, 3), torch.float32), make((5, 8), torch.float32, seed=1)
    check(lambda a, b: a.t() @ b.t(), a, b, **F32)
    check(lambda a, b: a[::2].t() @ b[:, ::2].t(), a, b, **F32)
    c = make((4, 2, 3), torch.float32)
    check(lambda c: torch.bmm(c.transpose(0, 1), c.permute(1, 2, 0)), c, **F32)
    check(lambda c: c.expand(5, 4, 2, 3) @ c[0].t(), c, **F32)
    check(lambda a: torch.mv(a.t(), a[:, 0]), a, **F32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_vector_products(dtype):
    x, y = make((7,), dtype), make((7,), dtype, seed=1)
    check(lambda x, y: torch.dot(x, y), x, y)
    check(lambda x, y: torch.vdot(x, y), x, y)
    check(lambda x, y: torch.outer(x, y), x, y)
    m = make((3, 7), dtype, seed=2)
    check(lambda m, x: torch.mv(m, x), m, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_addmm(dtype):
    c, a, b = make((3, 5), dtype), make((3, 4), dtype, seed=1), make((4, 5), dtype, seed=2)
    check(lambda c, a, b: torch.addmm(c, a, b), c, a, b, **tol(dtype))
    check(lambda c, a, b: torch.addmm(c[0], a, b, beta=3, alpha=-2), c, a, b, **tol(dtype))
    check(lambda c, a, b: torch.addmm(c[:, :1], a, b, beta=0), c, a, b, **tol(dtype))


def test_addmm_scalars_are_runtime_values():
    import torch_tpu.metrics

    c = make((3, 5), torch.float32)
    a, b = make((3, 4), torch.float32, seed=1), make((4, 5), torch.float32, seed=2)
    check(lambda c, a, b: torch.addmm(c, a, b, beta=1.5, alpha=2.0), c, a, b, **F32)
    compiles = torch_tpu.metrics.counters()["compile"]
    for beta, alpha in [(0.5, 2.0), (-1.25, 0.75), (1.0, 0.0)]:
        check(lambda c, a, b: torch.addmm(c, a, b, beta=beta, alpha=alpha), c, a, b, **F32)
    assert torch_tpu.metrics.counters()["compile"] == compiles


def test_beta_zero_ignores_nan():
    c = torch.full((3, 5), float("nan"))
    a, b = make((3, 4), torch.float32), make((4, 5), torch.float32, seed=1)
    check(lambda c, a, b: torch.addmm(c, a, b, beta=0), c, a, b, **F32)
    check(lambda c, a, b: torch.addmv(c[0, :3], a, b[:, 0], beta=0.0), c, a, b, **F32)
    check(lambda c, a, b: torch.baddbmm(c.expand(2, 3, 5), a.expand(2, 3, 4), b.expand(2, 4, 5),
                                        beta=0), c, a, b, **F32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_add_products(dtype):
    t = tol(dtype)
    m, v, w = make((3, 4), dtype), make((4,), dtype, seed=1), make((3,), dtype, seed=2)
    check(lambda w, m, v: torch.addmv(w, m, v, beta=2, alpha=3), w, m, v, **t)
    check(lambda m, v, w: torch.addr(m, w, v, beta=2, alpha=-1), m, v, w, **t)
    s, b1, b2 = make((3, 5), dtype), make((2, 3, 4), dtype, seed=1), make((2, 4, 5), dtype, seed=2)
    check(lambda s, b1, b2: torch.baddbmm(s, b1, b2, alpha=2), s, b1, b2, **t)
    check(lambda s, b1, b2: torch.addbmm(s, b1, b2, beta=-1), s, b1, b2, **t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear(dtype):
    x, w, bias = make((2, 3, 6), dtype), make((4, 6), dtype, seed=1), make((4,), dtype, seed=2)
    check(lambda x, w, bias: torch.nn.functional.linear(x, w, bias), x, w, bias, **tol(dtype))
    check(lambda x, w: torch.nn.functional.linear(x, w), x, w, **tol(dtype))
    check(lambda x, w, bias: torch.nn.functional.linear(x[0, 0], w, bias), x, w, bias, **tol(dtype))


def test_nn_linear_module():
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 4)
    x = make((5, 6), torch.float32)
    expected = layer(x)
    actual = layer.to("tpu")(x.to("tpu"))
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)


def test_out_and_in_place():
    a, b = make((3, 4), torch.float32), make((4, 5), torch.float32, seed=1)

    def with_out(a, b):
        o = torch.empty(3, 5, device=a.device)
        torch.mm(a, b, out=o)
        d = torch.empty((), device=a.device)
        torch.dot(a[0], b[:, 0], out=d)
        v = torch.empty(3, device=a.device)
        torch.mv(a, b[:, 1], out=v)
        return o, d, v, torch.bmm(a[None], b[None], out=torch.empty(1, 3, 5, device=a.device))

    check(with_out, a, b, **F32)
    c = make((3, 5), torch.float32, seed=2)
    check(lambda c, a, b: c.addmm_(a, b, beta=0.5, alpha=2), c, a, b, **F32)
    s = make((2, 3, 5), torch.float32, seed=3)
    check(lambda s, a, b: s.baddbmm_(a.expand(2, 3, 4), b.expand(2, 4, 5)), s, a, b,
          **F32)


def test_writes_through_views():
    a, b = make((3, 4), torch.float32), make((4, 5), torch.float32, seed=1)

    def into_view(a, b):
        base = torch.zeros(5, 6, device=a.device)
        torch.mm(a, b, out=base.t()[1:4])
        torch.mv(b.t(), a[0], out=base[:, 0])
        return base

    check(into_view, a, b, **F32)
    c = make((5, 3), torch.float32, seed=2)
    check(lambda c, a, b: c.t().addmm_(a, b), c, a, b, **F32)
    d = make((2, 3, 6), torch.float32, seed=3)
    check(lambda d, a, b: d[:, :, 1:].baddbmm_(a.expand(2, 3, 4), b.expand(2, 4, 5), alpha=-1),
          d, a, b, **F32)


# ---- Cholesky and triangular solves ----


def spd(shape, dtype=torch.float32, seed=0):
    """Symmetric (complex: Hermitian) positive-definite matrices, well
    conditioned."""
    a = make(shape, torch.complex128 if dtype.is_complex else torch.float64, seed)
    n = shape[-1]
    return (a @ a.mH / n + torch.eye(n, dtype=a.dtype)).to(dtype)


CHOLESKY_DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
# The slower tests take one complex dtype: complex64 runs the same programs
# as complex128 in another precision (the quicker tests take both).
SHORT_DTYPES = [torch.float32, torch.float64, torch.complex128]


@pytest.mark.parametrize("dtype", CHOLESKY_DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, upper):
    a = spd((3, 5, 5), dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype in (torch.float32, torch.complex64) else {}
    check(lambda a: torch.linalg.cholesky(a, upper=upper), a, **tol)
    check(lambda a: torch.linalg.cholesky_ex(a, upper=upper), a, **tol)  # (factor, info)
    check(lambda a: torch.linalg.cholesky(a.transpose(-2, -1)[1:]), a, **tol)  # views, batch of 2


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_cholesky_of_a_matrix_that_is_not_positive_definite(dtype):
    # info is nonzero exactly where the CPU's is; XLA's factor does not say
    # which minor failed, so the order it names may be lower than the CPU's.
    a = spd((2, 4, 4), dtype)
    a[1, 2, 2] = -5.0  # the leading minor of order 3 fails
    info = torch.linalg.cholesky_ex(a.to("tpu")).info.cpu()
    assert info[0] == 0 and 1 <= info[1] <= 3
    with pytest.raises(torch.linalg.LinAlgError, match="not positive-definite"):
        torch.linalg.cholesky(a.to("tpu"))
    check(torch.linalg.cholesky, a[:1])  # the process goes on


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("unitriangular", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_solve_triangular(dtype, upper, left, unitriangular):
    t = torch.linalg.cholesky(spd((2, 4, 4), dtype))
    t = t.transpose(-2, -1) if upper else t
    rhs = make((2, 4, 3) if left else (2, 3, 4), dtype, seed=2)
    check(lambda t, b: torch.linalg.solve_triangular(t, b, upper=upper, left=left, unitriangular=unitriangular),
          t, rhs)
    single = torch.complex64 if dtype.is_complex else torch.float32
    check(lambda t, b: torch.linalg.solve_triangular(t[0], b, upper=upper, left=left), t.to(single), rhs.to(single),
          rtol=1e-5, atol=1e-5)  # one matrix against a batch


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("dtype", SHORT_DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_inverse_and_the_older_apis(upper, dtype):
    """torch.cholesky_solve (batches broadcast), cholesky_inverse,
    triangular_solve (transposed, unit diagonal) and the deprecated
    torch.cholesky, with gradients, against the CPU."""
    tol = (dict(rtol=1e-4, atol=1e-5) if dtype in (torch.float32, torch.complex64)
           else dict(rtol=1e-10, atol=1e-12))
    a = spd((2, 4, 4), dtype)
    factor = torch.linalg.cholesky(a, upper=upper)
    rhs = make((3, 1, 4, 2), dtype, seed=2)
    check(with_grads(lambda b, f: torch.cholesky_solve(b, f, upper)), rhs, factor, **tol)
    check(with_grads(lambda f: torch.cholesky_inverse(f, upper)), factor, **tol)
    check(with_grads(lambda f: torch.cholesky_inverse(f.transpose(-2, -1)[1], not upper)), factor, **tol)
    for transpose in (False, True):
        for unitriangular in (False, True):
            check(with_grads(lambda b, f: torch.triangular_solve(b, f, upper, transpose, unitriangular)),
                  rhs[:, :1], factor[1], **tol)
    check(with_grads(lambda a: torch.cholesky(a, upper)), a, **tol)


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_cholesky_solve_inverse_empty_out_and_errors():
    factor = torch.linalg.cholesky(spd((3, 3), torch.float64))
    check(lambda b, f: torch.cholesky_solve(b, f), make((3, 0), torch.float64), factor)
    check(lambda b, f: torch.cholesky_solve(b, f), make((0, 2), torch.float64), torch.zeros(0, 0, dtype=torch.float64))
    check(torch.cholesky_inverse, torch.zeros(2, 0, 0))
    check(lambda b, f: torch.triangular_solve(b, f), make((0, 3, 1), torch.float64), factor)
    out = torch.empty(0, dtype=torch.float64, device="tpu")
    torch.cholesky_inverse(factor.to("tpu"), out=out)
    check(lambda f: torch.cholesky_inverse(f), factor)
    assert torch.allclose(out.cpu(), torch.cholesky_inverse(factor), rtol=1e-10, atol=1e-12)
    x, cloned = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.triangular_solve(make((3, 2), torch.float32).to("tpu"), factor.float().to("tpu"), out=(x, cloned))
    expected = torch.triangular_solve(make((3, 2), torch.float32), factor.float())
    assert torch.allclose(x.cpu(), expected[0], rtol=1e-5, atol=1e-6) and torch.equal(cloned.cpu(), expected[1])
    # (The minor named may be lower than the CPU's: see the test above.)
    with pytest.raises(torch.linalg.LinAlgError, match="cholesky: .* not positive-definite"):
        torch.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]], device="tpu"))
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes"):
        torch.cholesky_solve(make((4, 2), torch.float64).to("tpu"), factor.to("tpu"))
    assert torch.cholesky_inverse(factor.to("tpu")).shape == (3, 3)  # the device still works


def test_linalg_error_checks_under_compile():
    """linalg.cholesky, solve and inv read their info back to raise; in a
    compiled graph the check runs after the program, with the CPU's error."""
    import torch_tpu.metrics

    @torch.compile(backend="tpu")
    def solves(a, b):
        factor = torch.linalg.cholesky(a)
        return torch.linalg.solve(a, b) + torch.cholesky_solve(b, factor), torch.linalg.inv(a), \
            torch.linalg.cholesky_ex(a).info

    a, b = spd((2, 4, 4), torch.float64), make((2, 4, 2), torch.float64, seed=2)
    x, inverse, info = solves(a.to("tpu"), b.to("tpu"))
    assert torch.allclose(x.cpu(), 2 * torch.linalg.solve(a, b), rtol=1e-10, atol=1e-12)
    assert torch.allclose(inverse.cpu(), torch.linalg.inv(a), rtol=1e-10, atol=1e-12)
    assert torch.equal(info.cpu(), torch.zeros(2, dtype=torch.int32))
    compiles = torch_tpu.metrics.counters()["compile"]
    bad = a.clone()
    bad[1] = -bad[1]
    with pytest.raises(torch.linalg.LinAlgError, match=r"linalg.cholesky: \(Batch element 1\): .*not positive-definite"):
        solves(bad.to("tpu"), b.to("tpu"))
    assert torch.equal(solves(a.to("tpu"), b.to("tpu"))[2].cpu(), info.cpu())
    assert torch_tpu.metrics.counters()["compile"] == compiles  # one program throughout


def test_multivariate_normal_log_prob_and_gradients():
    # torch.distributions factors the covariance and solves with the factor;
    # both backwards are PyTorch's formulas over these lowerings.
    cov, mean, x = spd((4, 4), torch.float64), make((4,), torch.float64, 1), make((6, 4), torch.float64, 2)

    def log_prob(cov, mean, x):
        cov, mean = cov.detach().requires_grad_(), mean.detach().requires_grad_()
        lp = torch.distributions.MultivariateNormal(mean, covariance_matrix=cov).log_prob(x)
        lp.sum().backward()
        return lp, cov.grad, mean.grad

    check(log_prob, cov, mean, x)


# ---- LU: factor, solve, inverse, determinants ----


def with_grads(fn):
    """fn's outputs and the gradients of its float inputs after a weighted
    sum of its float outputs (weights fixed, so every entry counts)."""
    def differentiable(t):
        return t.is_floating_point() or t.is_complex()

    def run(*args):
        leaves = [a.detach().requires_grad_() if differentiable(a) else a for a in args]
        out = fn(*leaves)
        outs = out if isinstance(out, tuple) else (out,)
        parts = [torch.view_as_real(o.resolve_conj()) if o.is_complex() else o for o in outs if differentiable(o)]
        sum((o * torch.linspace(0.5, 1.5, o.numel(), dtype=o.dtype, device=o.device).view(o.shape)).sum()
            for o in parts).backward()
        return tuple(outs) + tuple(a.grad for a in leaves if differentiable(a))
    return run


LU_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}
LU_TOL.update({torch.complex64: LU_TOL[torch.float32], torch.complex128: LU_TOL[torch.float64]})
LU_DTYPES = CHOLESKY_DTYPES


@pytest.mark.parametrize("dtype", LU_DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (3, 5), (5, 3), (1, 1), (0, 3, 3)], ids=str)
def test_lu_factor_and_unpack(shape, dtype):
    """Same pivots (LAPACK's: the first largest magnitude, |re| + |im| for
    complex) and factors as the CPU; P, L, U and their gradients,
    rectangular too."""
    a = make(shape, dtype)
    check(torch.linalg.lu_factor_ex, a, **LU_TOL[dtype])
    check(with_grads(torch.linalg.lu), a, **LU_TOL[dtype])
    if shape[-1] == shape[-2]:
        check(with_grads(lambda a: torch.linalg.lu_factor(a).LU), a, **LU_TOL[dtype])


def test_lu_factor_zero_pivots_and_lu_unpack_flags():
    s = torch.zeros(2, 3, 3)
    s[0, 0, 0], s[1] = 1, torch.ones(3, 3)  # rank 1 each: info names the first zero pivot
    check(torch.linalg.lu_factor_ex, s)
    lu, pivots = torch.linalg.lu_factor(make((3, 4, 4), torch.float64))
    for data, pivot in ((True, False), (False, True)):
        check(lambda lu, p: torch.lu_unpack(lu, p, unpack_data=data, unpack_pivots=pivot), lu, pivots)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="LU without pivoting is not implemented"):
            torch.linalg.lu_factor(s.to(device), pivot=False)


@pytest.mark.parametrize("dtype", SHORT_DTYPES)
def test_solve_inverse_and_determinants(dtype):
    a, b = make((3, 4, 4), dtype), make((3, 4, 2), dtype, seed=1)
    tol = LU_TOL[dtype]
    check(with_grads(torch.linalg.solve), a, b, **tol)
    check(with_grads(lambda a, b: torch.linalg.solve(a.mT, b)), a, b, **tol)  # a non-contiguous A
    check(with_grads(lambda a, b: torch.linalg.solve(a, b.mT, left=False)), a, b, **tol)
    check(with_grads(torch.linalg.solve), a, b[..., 0], **tol)  # a batch of vectors
    check(with_grads(torch.linalg.solve), a[0], b, **tol)  # one matrix against a batch
    check(with_grads(torch.linalg.inv), a, **tol)
    check(with_grads(torch.linalg.det), a, **tol)
    check(with_grads(lambda a: torch.linalg.det(a.mT)), a, **tol)
    check(with_grads(torch.linalg.slogdet), a, **tol)
    check(with_grads(lambda a: torch.logdet(a @ a.mH + torch.eye(4, dtype=dtype, device=a.device))), a, **tol)
    lu, pivots = torch.linalg.lu_factor(a)
    for left, adjoint in ((True, True), (False, False), (False, True)):
        rhs = b if left else b.mT
        check(with_grads(lambda lu, p, r: torch.linalg.lu_solve(lu, p, r, left=left, adjoint=adjoint)),
              lu, pivots, rhs, **tol)


def test_solve_and_inverse_of_empty_matrices():
    # No matrices, 0x0 matrices, no right-hand sides: nothing to read (the
    # programs once failed to compile on their row gathers).
    check(torch.linalg.inv, make((0, 0), torch.float32))
    check(torch.linalg.inv_ex, make((2, 0, 0), torch.float32))
    check(torch.linalg.inv, make((0, 3, 3), torch.float32))
    check(torch.linalg.solve, make((0, 5, 5), torch.float32), make((0, 5, 1), torch.float32))
    check(torch.linalg.solve, make((0, 0), torch.float64), make((0, 3), torch.float64))
    lu, pivots = torch.linalg.lu_factor(make((3, 3), torch.float32))
    for adjoint in (False, True):
        check(lambda lu, p, r: torch.linalg.lu_solve(lu, p, r, adjoint=adjoint), lu, pivots, make((3, 0), torch.float32))
    check(lambda x, i: x.gather(0, i), make((0, 3), torch.float32), torch.zeros(0, 3, dtype=torch.long))
    check(lambda x, i: x.scatter_add(0, i, x), make((0, 3), torch.float32), torch.zeros(0, 3, dtype=torch.long))


def test_singular_matrices_raise_as_on_cpu():
    s = torch.ones(2, 3, 3, dtype=torch.float64)
    for device in ("cpu", "tpu"):
        with pytest.raises(torch.linalg.LinAlgError, match="singular"):
            torch.linalg.inv(s.to(device))
        with pytest.raises(torch.linalg.LinAlgError, match="singular"):
            torch.linalg.solve(s.to(device), s[..., 0].to(device))
    check(torch.linalg.det, s)  # zero, no error
    # inv_ex: info names the first zero pivot; the inverse is not finite
    # (CPU's LAPACK and the tpu leave different infinities and NaNs in it).
    inverse, info = torch.linalg.inv_ex(s.to("tpu"))
    assert torch.equal(info.cpu(), torch.linalg.inv_ex(s).info) and not inverse.isfinite().any()


@pytest.mark.parametrize("dtype", SHORT_DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 3), (3, 5), (6, 2), (1, 1), (0, 4, 3)], ids=str)
def test_qr(shape, dtype):
    """LAPACK's reflectors (geqrf; complex: R's diagonal real, tau complex),
    so the same Q and R, signs included; every mode, and the gradients of
    Q and R."""
    a, tol = make(shape, dtype), LU_TOL[dtype]
    check(torch.geqrf, a, **tol)
    check(lambda a, r, tau: torch.geqrf(a, out=(r, tau)), a, torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype),
          **tol)
    if shape[-2] >= shape[-1]:
        check(torch.linalg.householder_product, *torch.geqrf(a), **tol)
    for mode in ("reduced", "complete", "r"):
        check(lambda a: torch.linalg.qr(a, mode=mode), a, **tol)
    if shape[-2] >= shape[-1]:  # PyTorch differentiates reduced QR of tall matrices
        check(with_grads(torch.linalg.qr), a, **tol)


@pytest.mark.parametrize("dtype", SHORT_DTYPES)
def test_ormqr(dtype):
    """torch.ormqr: Q C, Q^H C, C Q and C Q^H from geqrf's reflectors, for
    tall, square and wide factors, batched and empty; out=; gradients; bad
    input raises as on the CPU."""
    tol = LU_TOL[dtype]
    for shape in ((2, 5, 3), (4, 4), (3, 5), (0, 3, 2)):
        a, tau = torch.geqrf(make(shape, dtype))
        m, batch = shape[-2], shape[:-2]
        for left in (True, False):
            c = make(batch + ((m, 2) if left else (2, m)), dtype, seed=1)
            for transpose in (False, True):
                check(lambda a, tau, c: torch.ormqr(a, tau, c, left, transpose), a, tau, c, **tol)
    a, tau = torch.geqrf(make((5, 3), dtype))
    c = make((5, 2), dtype, seed=1)
    check(lambda a, tau, c, out: torch.ormqr(a, tau, c, out=out), a, tau, c, torch.empty(0, dtype=dtype), **tol)
    check(with_grads(lambda a, tau, c: torch.ormqr(a, tau, c, transpose=True)), a, tau, c, **tol)
    a, tau, c = a.to("tpu"), tau.to("tpu"), c.to("tpu")
    for bad, match in ((lambda: torch.ormqr(a, tau, c[:4]), r"other.shape\[-2\] must be equal to input.shape\[-2\]"),
                       (lambda: torch.ormqr(a, tau[None], c), "one dimension less than input"),
                       (lambda: torch.ormqr(a, tau, c, out=torch.empty(0, dtype=torch.long, device="tpu")),
                        "Expected out to be safely castable")):
        with pytest.raises(RuntimeError, match="torch.ormqr: .*" + match):
            bad()


def test_orthogonal_init_and_zero_columns():
    """nn.init.orthogonal_ on the device (its QR runs there); a zero column
    reflects nothing (tau 0), as in LAPACK."""
    torch.manual_seed(0)
    w = torch.empty(6, 4, device="tpu")
    torch.nn.init.orthogonal_(w)
    assert torch.allclose((w.T @ w).cpu(), torch.eye(4), atol=1e-5)
    a = make((4, 3), torch.float64)
    a[:, 1] = 0
    check(torch.geqrf, a)
    check(torch.linalg.qr, a)
    a = make((2, 4, 3), torch.complex128)
    a[:, :, 0] = 0
    a[0, 0, 0] = 1j  # reflected all the same (LAPACK's tau = 1 + 1j); the other first column not
    check(torch.geqrf, a)
    check(torch.linalg.qr, a)


# ---- least squares ----

LSTSQ_SHAPES = [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((4, 4), (4, 1)), ((1, 5, 3), (3, 5, 2)), ((5, 3), (5,)),
                ((2, 5, 3), (2, 5)), ((0, 3), (0, 2)), ((3, 0), (3, 2)), ((0, 5, 3), (0, 5, 2))]


# Each dtype with the QR driver and one SVD driver; the other SVD drivers
# (the same program, other outputs kept) in float64.
LSTSQ_CASES = [(dtype, driver) for dtype in SHORT_DTYPES for driver in ("gels", "gelsd")] + [
    (torch.float64, "gelsy"), (torch.float64, "gelss")]


@pytest.mark.parametrize("dtype,driver", LSTSQ_CASES, ids=str)
@pytest.mark.parametrize("shapes", LSTSQ_SHAPES, ids=str)
def test_lstsq(shapes, dtype, driver):
    """Every output of each driver (gels from QR, the others from the SVD)
    with its CPU shape, tall, wide and square, broadcast batches, vector
    right-hand sides and empty matrices, and the solution's gradients."""
    a, b = make(shapes[0], dtype), make(shapes[1], dtype, seed=1)
    tol = LU_TOL[dtype]
    if driver == "gels" and a.shape[-1] == 0:
        # The CPU skips LAPACK for an empty A and reports residuals 0 for
        # gels (its other drivers, and the tpu's, give |b|^2).
        check(lambda a, b: torch.linalg.lstsq(a, b).solution, a, b)
        residuals = torch.linalg.lstsq(a.to("tpu"), b.to("tpu")).residuals.cpu()
        torch.testing.assert_close(residuals, b.abs().square().sum(-2), **tol)
        return
    check(lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver)), a, b, **tol)
    if a.numel():
        check(with_grads(lambda a, b: torch.linalg.lstsq(a, b, driver=driver).solution), a, b, **tol)


def test_lstsq_rank_deficient_default_driver_out_and_errors():
    """The SVD drivers' least-norm solution and rank of a rank-deficient A
    (residuals only where every A has full rank, never for gelsy) and rcond
    cutting singular values;
    gels is the tpu's default, as CUDA's; out=; bad input raises as on the CPU."""
    a, b = make((2, 6, 4), torch.float64), make((2, 6, 3), torch.float64, seed=1)
    a[0, :, 3] = a[0, :, 1] - a[0, :, 2]
    for driver in ("gelsy", "gelsd", "gelss"):
        check(lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver)), a, b, **LU_TOL[torch.float64])
    for driver in ("gelsd", "gelss"):  # gelsy's rcond cuts pivoted QR's R, not singular values
        check(lambda a, b: tuple(torch.linalg.lstsq(a, b, rcond=0.5, driver=driver)), a, b, **LU_TOL[torch.float64])
    a, b = a[1], b[1]
    expected = torch.linalg.lstsq(a, b, driver="gels")
    for actual, want in zip(torch.linalg.lstsq(a.to("tpu"), b.to("tpu")), expected):
        torch.testing.assert_close(actual.cpu(), want, rtol=1e-10, atol=1e-12)
    outs = tuple(torch.empty(0, dtype=dtype) for dtype in (torch.float64, torch.float64, torch.long, torch.float64))
    check(lambda a, b, *outs: torch.linalg.lstsq(a, b, driver="gelsd", out=outs), a, b, *outs)
    # outs of a dtype the result casts to safely (complex solution, int32 rank) take it, as on the CPU
    outs = tuple(torch.empty(0, dtype=dtype) for dtype in (torch.complex128, torch.float64, torch.int32, torch.float64))
    check(lambda a, b, *outs: torch.linalg.lstsq(a, b, driver="gelsd", out=outs), a, b, *outs)
    wrong_outs = tuple(torch.empty(0, dtype=dtype, device="tpu") for dtype in (torch.long, torch.float64, torch.long))
    a, b = a.to("tpu"), b.to("tpu")
    for bad, match in ((lambda: torch.linalg.lstsq(a, b[:5]), r"same number of rows, got input \[6, 4\].*other \[5, 3\]"),
                       (lambda: torch.linalg.lstsq(a, b.float()), "same dtype"),
                       (lambda: torch.linalg.lstsq(a, b, driver="gelsx"), "driver must be one of"),
                       (lambda: torch.linalg.lstsq(a.long(), b.long()), "float32, float64, complex64"),
                       (lambda: torch.linalg.lstsq(a[0], b[0]), "at least 2 dimensions"),
                       (lambda: torch.linalg.lstsq(a, b, out=wrong_outs + (torch.empty(0, device="tpu"),)),
                        "Expected solution to be safely castable from torch.float64 dtype, but got solution "
                        "with dtype torch.int64")):
        with pytest.raises(RuntimeError, match="torch.linalg.lstsq: .*" + match):
            bad()
    torch.testing.assert_close(torch.linalg.lstsq(a, b).solution.cpu(), expected.solution, rtol=1e-10, atol=1e-12)


# ---- matrix exponential ----


def matrix_exp_with_grad(a, g):
    """e^A and the gradient of <e^A, g> with respect to A."""
    a = a.detach().requires_grad_()
    e = torch.linalg.matrix_exp(a)
    e.backward(g)
    return e, a.grad


# (shape, scale): norms below the Taylor bound (no squaring), a few
# squarings, a batch whose matrices need different counts, many squarings,
# 1x1, an empty batch, zeros.
MATRIX_EXP = [((4, 4), 0.1), ((4, 4), 3.0), ((2, 3, 5, 5), 1.0), ((3, 4, 4), "mixed"), ((6, 6), 30.0),
              ((1, 1), 2.0), ((0, 3, 3), 1.0), ((3, 3), 0.0)]


@pytest.mark.parametrize("dtype,rtol", [(torch.float32, 1e-5), (torch.float64, 1e-12), (torch.complex128, 1e-12)],
                         ids=str)
@pytest.mark.parametrize("shape,scale", MATRIX_EXP, ids=str)
def test_matrix_exp(shape, scale, dtype, rtol):
    a = make(shape, torch.complex128 if dtype.is_complex else torch.float64)
    a = a * (torch.tensor([0.05, 1.0, 8.0]).view(3, 1, 1) if scale == "mixed" else scale)
    e = torch.linalg.matrix_exp(a)
    a, g = a.to(dtype), make(shape, dtype, seed=1)
    # Relative to the largest entry: e^A spans magnitudes; many squarings
    # carry the rounding of the first product along in either computation.
    atol = rtol * (30 if scale == 30.0 else 1) * max(e.abs().max().item() if e.numel() else 1, 1)
    check(matrix_exp_with_grad, a, g, rtol=rtol, atol=atol)


def test_matrix_exp_views_alias_orthogonal_parametrization_and_errors():
    a = make((2, 4, 4), torch.float32)
    check(lambda a: torch.matrix_exp(a.transpose(-2, -1)[1]), a, rtol=1e-5, atol=1e-5)
    # nn.utils.parametrizations.orthogonal maps square weights through
    # matrix_exp, from a base its registration makes with geqrf and
    # householder_product (on the module's device).
    def orthogonal_step(w, x):
        layer = torch.nn.Linear(4, 4, bias=False, device=w.device)
        with torch.no_grad():
            layer.weight.copy_(w)
        layer = torch.nn.utils.parametrizations.orthogonal(layer)
        y = layer(x)
        y.square().sum().backward()
        return y, layer.parametrizations.weight.original.grad, layer.weight @ layer.weight.T
    check(orthogonal_step, a[0], make((3, 4), torch.float32, seed=2), rtol=1e-5, atol=1e-5)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="square"):
            torch.linalg.matrix_exp(a[:, :3].to(device))
    assert torch.linalg.matrix_exp(a.to("tpu")).shape == (2, 4, 4)  # the device still works


# ---- cdist ----


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, float("inf"), 3.0, 0.5])
def test_cdist(p):
    x1, x2 = make((2, 5, 4), torch.float64), make((2, 6, 4), torch.float64, seed=1)
    x2[0, 0] = x1[0, 0]  # a zero distance: its gradient is 0

    def run(a, c):
        a, c = a.detach().requires_grad_(), c.detach().requires_grad_()
        d = torch.cdist(a, c, p=p)
        d.backward(torch.ones_like(d) if p == 0 else make(d.shape, torch.float64, 3).to(d.device))
        return d, a.grad, c.grad

    check(run, x1, x2)
    check(lambda a, c: torch.cdist(a[0], c[0].t().contiguous().t(), p=p), x1.float(), x2.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, float("inf"), 3.0, 0.5])
def test_pdist(p):
    x = make((6, 4), torch.float64)
    x[4] = x[1]  # a zero distance: its gradient is 0

    def run(x):
        x = x.detach().requires_grad_()
        d = F.pdist(x, p)
        d.backward(torch.ones_like(d) if p == 0 else make(d.shape, torch.float64, 3).to(d.device))
        return d, x.grad

    check(run, x)
    check(lambda x: F.pdist(x.t(), p), make((3, 5), torch.float32), rtol=1e-5, atol=1e-5)  # non-contiguous


def test_pdist_few_rows_and_errors():
    check(lambda x: F.pdist(x), make((1, 3), torch.float64))  # no pairs
    check(lambda x: F.pdist(x), make((0, 3), torch.float64))
    check(lambda x: F.pdist(x, 1.0), make((2, 1), torch.float32))
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 3D"):
            F.pdist(torch.ones(2, 3, 4, device=device))
        with pytest.raises(RuntimeError, match="pdist only supports non-negative p values"):
            F.pdist(torch.ones(2, 3, device=device), -1.0)
    assert F.pdist(torch.ones(3, 2, device="tpu")).tolist() == [0.0, 0.0, 0.0]


# ---- cross product ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_linalg_cross_dtypes_and_broadcasting(dtype):
    check(torch.linalg.cross, make((4, 3), dtype), make((4, 3), dtype, seed=1),
          **(F32 if dtype == torch.float32 else {}))
    check(torch.linalg.cross, make((2, 4, 3), dtype), make((2, 1, 3), dtype, seed=1))


def test_cross_dims_views_empty_out_and_gradients():
    a, b = make((3, 5, 2), torch.float32), make((3, 5, 2), torch.float32, seed=1)
    check(lambda a, b: torch.cross(a, b, dim=0), a, b, **F32)
    check(lambda a, b: torch.linalg.cross(a.transpose(0, 2), b.transpose(0, 2)), a, b, **F32)
    check(torch.linalg.cross, make((0, 3), torch.float32), make((0, 3), torch.float32))
    check(lambda a, b, out: torch.linalg.cross(a, b, out=out), make((4, 3), torch.float32),
          make((4, 3), torch.float32, seed=1), torch.empty(4, 3), **F32)

    def grads(a, b):
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        (torch.linalg.cross(a, b) * torch.arange(12.0, device=a.device).view(4, 3)).sum().backward()
        return a.grad, b.grad
    check(grads, make((4, 3), torch.float32), make((4, 3), torch.float32, seed=1), **F32)


def test_cross_needs_a_size_3_dim():
    with pytest.raises(RuntimeError, match="must have length 3"):  # PyTorch's own check
        torch.linalg.cross(make((4, 2), torch.float32).to("tpu"), make((4, 2), torch.float32).to("tpu"))
    ones = torch.ones(1, 3, device="tpu")
    assert torch.linalg.cross(ones, ones).shape == (1, 3)
