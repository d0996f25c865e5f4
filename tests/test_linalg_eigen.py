"""Hermitian eigendecomposition and SVD on tpu (csrc/ops/eigen.c, Jacobi
rotations) against PyTorch's CPU (LAPACK): torch.linalg.eigh / eigvalsh
(UPLO 'L' and 'U'), torch.linalg.svd (full_matrices or not) / svdvals, real
and complex, and what PyTorch builds on them: pinv, matrix_rank, cond,
matrix_norm of ord 2 and 'nuc'. Batched, empty, 1x1, wide, tall,
rank-deficient, non-contiguous, out=, autograd and torch.compile. Also
linalg.eig and eigvals, run on the host as on CUDA.

Eigenvectors and singular vectors are only defined up to sign or phase (and
within repeated values up to a rotation), so vectors are checked by
invariants: reconstruction (V diag(w) V^H = A, U diag(S) Vh = A),
orthonormality and, for distinct eigenvalues, |v^H v_cpu| = 1 per column.
Values are compared with CPU's directly.

Tolerances, relative to the matrix's largest singular value |A|:
float32 values and reconstruction 2e-5 |A|, orthonormality 1e-5;
float64 1e-12 |A| and 1e-12 (observed up to n = 48: float32 <= 8e-7 |A|
and 6e-7, float64 <= 4e-15 |A| and 2e-15; complex eigh up to n = 64:
complex64 <= 1e-6 |A| and 4e-7, complex128 <= 2e-15 |A| and 9e-16).
Gradients, on matrices whose spectrum is well separated: rtol/atol 1e-4 in
float32, 1e-9 in float64 (observed 3e-6 and 6e-15 on gradients of size ~5;
complex128 4e-15)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from parity import assert_close, check  # noqa: E402

DTYPES = [torch.float32, torch.float64]
SVD_DTYPES = DTYPES + [torch.complex128]  # complex64 in test_built_on_complex_svd


def tolerance(dtype):
    """(values and reconstruction per unit of |A|, orthonormality)."""
    return (2e-5, 1e-5) if dtype in (torch.float32, torch.complex64) else (1e-12, 1e-12)


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.complex128 if dtype.is_complex else torch.float64).to(dtype)


def widened(t):
    """t in float64 or complex128."""
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def symmetric(shape, dtype, seed=0):
    """Symmetric, or Hermitian when complex."""
    a = make(shape, dtype, seed)
    return (a + a.mH) / 2


def scale_of(a):
    """|A|: the largest singular value (1 for empty or zero matrices)."""
    if a.numel() == 0:
        return 1.0
    return max(torch.linalg.matrix_norm(widened(a.cpu()), ord=2).max().item(), 1.0)


def assert_orthonormal(q, tol, columns=True):
    """q's columns (or rows) are orthonormal."""
    q = widened(q.cpu())
    gram = q.mH @ q if columns else q @ q.mH
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype).expand_as(gram)
    torch.testing.assert_close(gram, eye, rtol=0, atol=tol)


def check_eigh(a, uplo="L", distinct=False):
    """eigh on tpu: values against CPU's, V diag(w) V^H against A (from its
    UPLO triangle and its diagonal's real part), V orthonormal; with distinct
    eigenvalues, each column the CPU's times a sign or phase."""
    values_tol, orth_tol = tolerance(a.dtype)
    full = a.tril(-1) if uplo == "L" else a.triu(1)
    full = full + full.mH + torch.diag_embed(a.diagonal(dim1=-2, dim2=-1).real.to(a.dtype))
    atol = values_tol * scale_of(full)
    w, v = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
    expected_w, expected_v = torch.linalg.eigh(a, UPLO=uplo)
    assert_close(w, expected_w, rtol=0, atol=atol)
    assert v.shape == a.shape and v.dtype == a.dtype and v.device.type == "tpu"
    w, v = w.cpu().double(), widened(v.cpu())
    torch.testing.assert_close((v * w.unsqueeze(-2).to(v.dtype)) @ v.mH, widened(full), rtol=0, atol=atol)
    assert_orthonormal(v, orth_tol)
    if distinct:
        overlap = (v.mH @ widened(expected_v)).diagonal(dim1=-2, dim2=-1).abs()
        torch.testing.assert_close(overlap, torch.ones_like(overlap), rtol=0, atol=10 * orth_tol)


def check_svd(a, full_matrices):
    """svd on tpu: S against CPU's, U diag(S) Vh against A, U's columns and
    Vh's rows orthonormal, shapes as on the CPU."""
    values_tol, orth_tol = tolerance(a.dtype)
    atol = values_tol * scale_of(a)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=full_matrices)
    expected = torch.linalg.svd(a, full_matrices=full_matrices)
    assert (u.shape, s.shape, vh.shape) == tuple(x.shape for x in expected)
    assert_close(s, expected.S, rtol=0, atol=atol)
    k = s.shape[-1]
    u, vh = widened(u.cpu()), widened(vh.cpu())
    reconstructed = u[..., :k] @ torch.diag_embed(s.cpu().to(u.dtype)) @ vh[..., :k, :]
    torch.testing.assert_close(reconstructed, widened(a), rtol=0, atol=atol)
    assert_orthonormal(u, orth_tol)
    assert_orthonormal(vh, orth_tol, columns=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 1, 1), (2, 5, 5), (2, 1, 8, 8), (16, 16)])
def test_eigh(shape, uplo, dtype):
    # Garbage in the triangle UPLO does not name: it must not be read.
    a = symmetric(shape, dtype) + (make(shape, dtype, seed=1).triu(1) if uplo == "L" else make(shape, dtype, 1).tril(-1))
    check_eigh(a, uplo)


def test_eigh_complex():
    """Hermitian matrices: complex128 batched and with UPLO 'U', repeated
    eigenvalues, one complex64 case; garbage in the other triangle and an
    imaginary part on the diagonal, which LAPACK does not read either. And
    pinv and matrix_rank with hermitian=True, which use eigh."""
    q, _ = torch.linalg.qr(make((6, 6), torch.complex128, seed=2))
    repeated = (q * torch.tensor([1.0, 1, 1, 2, 2, -3], dtype=torch.float64)) @ q.mH
    for shape, uplo, dtype in [((2, 5, 5), "L", torch.complex128), ((6, 6), "U", torch.complex128),
                               ((7, 7), "L", torch.complex64)]:
        a = symmetric(shape, dtype)
        other = make(shape, dtype, seed=1)
        other = other.triu(1) if uplo == "L" else other.tril(-1)
        check_eigh(a + other + 1j * torch.eye(shape[-1], dtype=dtype), uplo, distinct=True)
    check_eigh(repeated, "U")
    check_eigh(torch.zeros(3, 3, dtype=torch.complex64))
    s = symmetric((5, 5), torch.complex128)
    check(lambda s: torch.linalg.pinv(s, hermitian=True), s, rtol=1e-10, atol=1e-10 * scale_of(s))
    check(lambda s: torch.linalg.matrix_rank(s, hermitian=True), s)


@pytest.mark.parametrize("dtype", DTYPES + [torch.complex128])
def test_eigvalsh_and_no_vectors(dtype):
    a = symmetric((3, 6, 6), dtype)
    values_tol = tolerance(dtype)[0] * scale_of(a)
    check(lambda a: torch.linalg.eigvalsh(a), a, rtol=0, atol=values_tol)
    check(lambda a: torch.linalg.eigvalsh(a, UPLO="U"), a, rtol=0, atol=values_tol)
    check(lambda a: torch.ops.aten._linalg_eigh(a, "L", False)[0], a, rtol=0, atol=values_tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_special_spectra(dtype):
    """Repeated eigenvalues, a zero matrix, a diagonal one, a huge and a
    tiny scale, a singular matrix, and an ill-conditioned one (n odd and even)."""
    q, _ = torch.linalg.qr(make((7, 7), torch.float64))
    repeated = (q @ torch.diag(torch.tensor([1.0, 1, 1, 2, 2, -3, 0], dtype=torch.float64)) @ q.T).to(dtype)
    ill = (q @ torch.diag(torch.logspace(0, -6, 7, dtype=torch.float64)) @ q.T).to(dtype)
    for a in [repeated, ill, torch.zeros(4, 4, dtype=dtype), torch.diag(torch.tensor([3.0, -1, 2], dtype=dtype)),
              symmetric((6, 6), dtype) * 1e20, symmetric((5, 5), dtype) * 1e-20, torch.ones(6, 6, dtype=dtype)]:
        check_eigh(a.clone())


@pytest.mark.parametrize("dtype", SVD_DTYPES)
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", [(1, 6), (6, 1), (3, 3), (5, 4), (2, 7, 3), (2, 1, 3, 8), (16, 16), (4, 1, 1)])
def test_svd(shape, full_matrices, dtype):
    check_svd(make(shape, dtype), full_matrices)


@pytest.mark.parametrize("dtype", SVD_DTYPES)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_rank_deficient(full_matrices, dtype):
    """Zero singular values: U and Vh still orthonormal (completed), S near 0."""
    low = make((2, 6, 2), dtype) @ make((2, 2, 5), dtype, seed=1)  # rank 2
    cases = [low, low.mT, torch.zeros(3, 4, dtype=dtype), torch.ones(5, 3, dtype=dtype),
             torch.diag(torch.tensor([2.0, 0, 1, 0], dtype=dtype)), make((1, 4), dtype).expand(5, 4)]
    for a in cases:
        check_svd(a.clone(), full_matrices)


@pytest.mark.parametrize("dtype", SVD_DTYPES)
def test_svdvals_and_no_vectors(dtype):
    a = make((3, 5, 7), dtype)
    atol = tolerance(dtype)[0] * scale_of(a)
    check(lambda a: torch.linalg.svdvals(a), a, rtol=0, atol=atol)
    check(lambda a: torch.linalg.svdvals(a.mT), a, rtol=0, atol=atol)
    check(lambda a: torch.linalg.svd(a, full_matrices=False).S, a, rtol=0, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_built_on_svd_and_eigh(dtype):
    """pinv, matrix_rank, cond, matrix_norm (2, -2, 'nuc'), against the CPU."""
    a = make((2, 6, 4), dtype)
    low = make((6, 2), dtype) @ make((2, 5), dtype, seed=1)
    s = symmetric((5, 5), dtype)
    values_tol = tolerance(dtype)[0]
    loose = dict(rtol=10 * values_tol, atol=10 * values_tol * scale_of(a))
    check(lambda a: torch.linalg.pinv(a), a, **loose)
    check(lambda a: torch.linalg.pinv(a), low, rtol=1e-3 if dtype == torch.float32 else 1e-9,
          atol=1e-4 if dtype == torch.float32 else 1e-10)
    check(lambda s: torch.linalg.pinv(s, hermitian=True), s, **loose)
    check(lambda a: torch.linalg.matrix_rank(a), a)
    check(lambda a: torch.linalg.matrix_rank(a), low)
    check(lambda s: torch.linalg.matrix_rank(s, hermitian=True), s)
    check(lambda a: torch.linalg.cond(a), a, **loose)
    for ord in [2, -2, "nuc"]:
        check(lambda a: torch.linalg.matrix_norm(a, ord=ord), a, **loose)
    check(lambda a: torch.linalg.norm(a[0], ord=2), a, **loose)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_built_on_complex_svd(dtype):
    """pinv (so lstsq's gradient), matrix_rank, cond and matrix_norm of
    complex matrices, and lstsq's SVD drivers."""
    a, b = make((2, 6, 4), dtype), make((2, 6, 3), dtype, seed=2)
    low = make((6, 2), dtype) @ make((2, 5), dtype, seed=1)
    values_tol = tolerance(dtype)[0]
    loose = dict(rtol=10 * values_tol, atol=10 * values_tol * scale_of(a))
    check(lambda a: torch.linalg.pinv(a), a, **loose)
    check(lambda a: torch.linalg.matrix_rank(a), a)
    check(lambda a: torch.linalg.matrix_rank(a), low)
    check(lambda a: torch.linalg.cond(a), a, **loose)
    for ord in [2, -2, "nuc"]:
        check(lambda a: torch.linalg.matrix_norm(a, ord=ord), a, **loose)
    for driver in ("gelsd", "gelss"):
        check(lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver)), a, b, **loose)

    def lstsq_gradient(a, b):
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        torch.view_as_real(torch.linalg.lstsq(a, b).solution).sum().backward()
        return a.grad, b.grad
    check(lstsq_gradient, a, b, **loose)


def test_empty_and_zero_batch():
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        a = torch.zeros(shape)
        check(lambda a: torch.linalg.eigh(a), a)
        check(lambda a: torch.linalg.eigvalsh(a), a)
    check(lambda a: torch.linalg.eigh(a), torch.zeros(2, 0, 0, dtype=torch.complex64))
    for shape in [(0, 0), (2, 0, 0), (3, 0), (0, 3), (0, 3, 3), (2, 0, 4)]:
        for full_matrices in [False, True]:
            # The CPU's U or Vh beside an empty dim is the identity.
            check(lambda a: torch.linalg.svd(a, full_matrices=full_matrices), torch.zeros(shape))
        check(lambda a: torch.linalg.svdvals(a), torch.zeros(shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_input(dtype):
    base = symmetric((3, 10, 10), dtype)
    check_eigh(base[:, ::2, ::2])
    check_eigh(base[1::2, 1:7, 1:7], "U")
    b = make((4, 9, 6), dtype)
    check_svd(b.mT, False)
    check_svd(b[::2, 1::2, ::2], True)
    check_svd(b.permute(2, 0, 1)[:, 1:4], False)


def test_out_variants():
    a, m = symmetric((2, 5, 5), torch.float32), make((2, 5, 3), torch.float32)
    values_tol = tolerance(torch.float32)[0] * 8

    def eigvalsh_out(a):
        w = torch.empty(0, device=a.device)
        torch.linalg.eigvalsh(a, out=w)
        return w

    def svdvals_out(m):
        s = torch.empty(0, device=m.device)
        torch.linalg.svdvals(m, out=s)
        return s

    check(eigvalsh_out, a, rtol=0, atol=values_tol)
    check(svdvals_out, m, rtol=0, atol=values_tol)
    t = a.to("tpu")
    w, v = torch.empty(2, 5, device="tpu"), torch.empty(2, 5, 5, device="tpu")
    result = torch.linalg.eigh(t, out=(w, v))
    assert result[0] is w and result[1] is v
    assert_close(w, torch.linalg.eigvalsh(a), rtol=0, atol=values_tol)
    torch.testing.assert_close((v @ torch.diag_embed(w) @ v.mT).cpu(), a, rtol=0, atol=values_tol)
    u, s, vh = torch.empty(0, device="tpu"), torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    result = torch.linalg.svd(m.to("tpu"), full_matrices=False, out=(u, s, vh))
    assert result[0] is u and result[1] is s and result[2] is vh
    assert (u.shape, s.shape, vh.shape) == ((2, 5, 3), (2, 3), (2, 3, 3))
    torch.testing.assert_close((u @ torch.diag_embed(s) @ vh).cpu(), m, rtol=0, atol=values_tol)
    # out= into a strided view of a larger tensor.
    big = torch.zeros(2, 5, 10, device="tpu")
    torch.linalg.eigh(t, out=(torch.empty(2, 5, device="tpu"), big[..., ::2]))
    assert_orthonormal(big[..., ::2], tolerance(torch.float32)[1])
    assert big[..., 1::2].abs().max().item() == 0
    # Complex: real values, complex vectors.
    h = symmetric((2, 5, 5), torch.complex128)
    w, v = torch.empty(0, dtype=torch.float64, device="tpu"), torch.empty(0, dtype=torch.complex128, device="tpu")
    result = torch.linalg.eigh(h.to("tpu"), out=(w, v))
    assert result[0] is w and result[1] is v and v.shape == (2, 5, 5)
    assert_close(w, torch.linalg.eigvalsh(h), rtol=0, atol=1e-12 * scale_of(h))
    torch.testing.assert_close(((v * w.unsqueeze(-2)) @ v.mH).cpu(), h, rtol=0, atol=1e-12 * scale_of(h))


def test_torch_svd_and_legacy_names():
    """torch.svd (V, not Vh; some=True) and torch.linalg.eigh's tuple names."""
    a = make((6, 4), torch.float32)
    u, s, v = torch.svd(a.to("tpu"))
    assert u.shape == (6, 4) and v.shape == (4, 4)
    torch.testing.assert_close((u @ torch.diag(s) @ v.T).cpu(), a, rtol=0, atol=1e-5 * scale_of(a))
    result = torch.linalg.eigh(symmetric((3, 3), torch.float32).to("tpu"))
    assert result.eigenvalues is result[0] and result.eigenvectors is result[1]


def separated(n, dtype, seed=0):
    """A symmetric (Hermitian) matrix with eigenvalues 1, 2, .., n (well separated)."""
    q, _ = torch.linalg.qr(make((n, n), torch.complex128 if dtype.is_complex else torch.float64, seed))
    return (q * torch.arange(1.0, n + 1, dtype=torch.float64) @ q.mH).to(dtype)


def grad_tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype in (torch.float32, torch.complex64) else dict(rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", DTYPES + [torch.complex128])
def test_eigh_gradient(dtype):
    weights, probe = make((5, 5), dtype.to_real(), seed=2), make((5, 5), dtype, seed=3)

    def loss(a):
        w, v = torch.linalg.eigh(a)
        # Blind to each eigenvector's sign (phase), or complex eigh's backward raises.
        magnitudes = (v * v.conj()).real * weights.to(a.device)
        spectral = (v * w.unsqueeze(-2).to(v.dtype)) @ v.mH * probe.to(a.device)
        return (w * torch.arange(5.0, dtype=w.dtype, device=a.device)).sum() + magnitudes.sum() + spectral.sum().real

    a = separated(5, dtype)
    cpu = a.clone().requires_grad_()
    loss(cpu).backward()
    tpu = a.to("tpu").requires_grad_()
    loss(tpu).backward()
    assert_close(tpu.grad, cpu.grad, **grad_tol(dtype))


@pytest.mark.parametrize("dtype", SVD_DTYPES)
def test_svd_gradient(dtype):
    q1, _ = torch.linalg.qr(make((6, 4), torch.float64, seed=3))
    q2, _ = torch.linalg.qr(make((4, 4), torch.float64, seed=4))
    a = (q1 @ torch.diag(torch.tensor([4.0, 3, 2, 1], dtype=torch.float64)) @ q2.T).to(dtype)
    if dtype.is_complex:
        a = a * torch.polar(torch.ones(4, dtype=torch.float64), torch.arange(4.0, dtype=torch.float64)).to(dtype)
    weights, probe = make((4,), dtype, seed=5), make((6, 4), dtype, seed=6)

    def loss(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        # u_i vh_i is sign- (phase-) invariant.
        return (s * s).sum() + ((u * weights.to(a.device)) @ vh * probe.to(a.device)).sum().real

    def loss_wide(a):
        return torch.linalg.svdvals(a.mT).sum() + loss(a)

    for fn in [loss, loss_wide]:
        cpu = a.clone().requires_grad_()
        fn(cpu).backward()
        tpu = a.to("tpu").requires_grad_()
        fn(tpu).backward()
        assert_close(tpu.grad, cpu.grad, **grad_tol(dtype))


def test_compiled():
    """torch.compile(backend="tpu") of a function calling eigh (real and
    complex) and svd."""

    def fn(a, b, h):
        w, v = torch.linalg.eigh(a)
        s = torch.linalg.svdvals(b)
        u, _, vh = torch.linalg.svd(b, full_matrices=False)
        wc, vc = torch.linalg.eigh(h, UPLO="U")
        return w, (v * w[None]) @ v.T, s, u @ vh, wc, (vc * wc[None]) @ vc.mH

    a, b, h = symmetric((6, 6), torch.float32), make((7, 5), torch.float32), symmetric((4, 4), torch.complex128)
    compiled = torch.compile(fn, backend="tpu", dynamic=False)
    tol = dict(rtol=0, atol=2e-5 * scale_of(b))
    assert_close(compiled(a.to("tpu"), b.to("tpu"), h.to("tpu")), fn(a, b, h), **tol)


def test_eig_compiled():
    """torch.compile(backend="tpu") of a function calling eig and eigvals:
    the backend cuts the graph around each host call, runs the pieces
    between as programs, and a second call compiles nothing. The values, a
    phase-blind function of the vectors and the gradient are the CPU's."""
    import torch_tpu.metrics

    def fn(a):
        w, v = torch.linalg.eig(a)
        return w * 2, v.abs().sum(-2), torch.linalg.eigvals(a @ a).abs()

    def loss_and_grad(f, a):
        a = a.detach().requires_grad_()
        outs = f(a)
        sum(o.abs().sum() for o in outs).backward()
        return outs, a.grad

    a = make((2, 5, 5), torch.float64)
    compiled = torch.compile(fn, backend="tpu", dynamic=False)
    expected = loss_and_grad(fn, a)
    assert_close(loss_and_grad(compiled, a.to("tpu")), expected, rtol=1e-9, atol=1e-9)
    compiles = torch_tpu.metrics.counters()["compile"]
    assert_close(loss_and_grad(compiled, a.to("tpu")), expected, rtol=1e-9, atol=1e-9)
    assert torch_tpu.metrics.counters()["compile"] == compiles


def test_larger_matrix():
    """One 48 x 48 case of each: the sweeps converge at a larger size."""
    a, b = symmetric((48, 48), torch.float64), make((48, 40), torch.float32)
    check_eigh(a)
    check_eigh(a.float())
    check_svd(b, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_eig_and_eigvals_on_the_host(dtype):
    """linalg.eig and eigvals are the CPU's (LAPACK's geev on the host, as
    PyTorch's CUDA kernel runs it): batched, empty, out=, and gradients,
    which run on the tpu (complex products and solves), of a loss blind to
    the vectors' phases."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn((2, 4, 4), generator=g, dtype=dtype)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype in (torch.float32, torch.complex64) else dict(rtol=1e-9, atol=1e-9)
    check(torch.linalg.eig, a)
    check(torch.linalg.eigvals, a)
    check(torch.linalg.eig, a[:0])
    values = torch.empty(0, dtype=torch.linalg.eigvals(a).dtype)
    check(lambda a, w, v: torch.linalg.eig(a, out=(w, v)), a, values, values.clone())
    check(lambda a, w: torch.linalg.eigvals(a, out=w), a, values)
    wider = torch.empty(0, dtype=torch.complex128)  # a safe cast, as on the CPU
    check(lambda a, w, v: torch.linalg.eig(a, out=(w, v)), a, wider, wider.clone())
    real = torch.empty(0, dtype=torch.float64, device="tpu")
    with pytest.raises(RuntimeError, match="torch.linalg.eig: Expected eigenvalues to be safely castable"):
        torch.linalg.eig(a.to("tpu"), out=(real, real.clone()))
    with pytest.raises(RuntimeError, match="torch.linalg.eigvals: Expected eigenvalues to be safely castable"):
        torch.linalg.eigvals(a.to("tpu"), out=real)

    def gradient(a):
        a = a.detach().requires_grad_()
        w, v = torch.linalg.eig(a)
        (w.abs().sum() + v.abs().sum()).backward()
        return a.grad
    check(gradient, a, **tol)


def test_refusals():
    """Low-precision inputs fail with a message saying what to do."""
    with pytest.raises((NotImplementedError, RuntimeError), match="float32 or float64"):
        torch.linalg.eigh(torch.eye(3, dtype=torch.float16, device="tpu"))
    with pytest.raises(RuntimeError, match="driver"):
        torch.linalg.svd(torch.eye(3, device="tpu"), driver="gesvd")
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.eigh(torch.ones(3, 4, device="tpu"))
