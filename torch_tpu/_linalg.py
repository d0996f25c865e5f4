"""torch.linalg.solve, det and slogdet on the tpu, computed as PyTorch's
CPU and CUDA kernels compute them: from the LU factors (linalg_lu_factor_ex
and linalg_lu_solve, lowered in csrc/ops/factorizations.c), which they return for the
backward formulas to reuse. det and slogdet factor A^T for a contiguous real
A (LAPACK wants columns; det(A^T) = det(A)), solve factors A itself; the
factors returned here are the same ones. Also the deprecated torch.cholesky:
linalg_cholesky_ex (csrc/ops/triangular.c) with its info read back, as
PyTorch's kernel does. And torch.linalg.lstsq, from QR (gels) or the SVD
(the other drivers), both lowered in C; torch.ormqr from householder_product;
and torch.linalg.eig and eigvals, on the host as on CUDA."""
import torch

_aten_tpu = torch.library.Library("aten", "IMPL", "PrivateUse1")


def _factor_for_det(A):
    """linalg_lu_factor_ex of A, or of A^T for a contiguous real A."""
    return torch.ops.aten.linalg_lu_factor_ex(A.mT if A.is_contiguous() and not A.is_complex() else A)


def _permutation_sign(pivots):
    """det(P): 1 for an even number of row swaps, -1 for an odd one."""
    swaps = (torch.arange(1, pivots.shape[-1] + 1, device=pivots.device, dtype=pivots.dtype) != pivots).sum(-1)
    return 1 - 2 * (swaps % 2)


def _linalg_solve_ex(A, B, *, left=True, check_errors=False):
    LU, pivots, info = torch.ops.aten.linalg_lu_factor_ex(A)
    vector = B.dim() == 1 or (A.dim() - 1 == B.dim() and B.shape == A.shape[:-1])
    X = torch.ops.aten.linalg_lu_solve(LU, pivots, B.unsqueeze(-1) if vector else B, left=left)
    if check_errors:
        torch._linalg_check_errors(info, "torch.linalg.solve_ex", is_matrix=A.dim() == 2)
    return X.squeeze(-1) if vector else X, LU, pivots, info


def _linalg_det(A):
    LU, pivots, _ = _factor_for_det(A)
    return _permutation_sign(pivots) * LU.diagonal(0, -2, -1).prod(-1), LU, pivots


def _linalg_slogdet(A):
    LU, pivots, _ = _factor_for_det(A)
    diagonal = LU.diagonal(0, -2, -1)
    return diagonal.sgn().prod(-1) * _permutation_sign(pivots), diagonal.abs().log().sum(-1), LU, pivots


def _cholesky(A, upper=False):
    L, info = torch.ops.aten.linalg_cholesky_ex(A, upper=upper)
    torch._linalg_check_errors(info, "cholesky", is_matrix=A.dim() == 2)
    return L


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _check_lstsq(A, B):
    shapes = f"input {list(A.shape)} {A.dtype}, other {list(B.shape)} {B.dtype}"
    torch._check(A.dim() >= 2, lambda: f"torch.linalg.lstsq: input must have at least 2 dimensions, got {shapes}")
    torch._check(A.dtype == B.dtype, lambda: f"torch.linalg.lstsq: input and other must have the same dtype, got {shapes}")
    torch._check(A.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
                 lambda: f"torch.linalg.lstsq: takes float32, float64, complex64 or complex128 (convert the "
                         f"inputs), got {shapes}")
    torch._check(A.dim() - B.dim() in (0, 1),
                 lambda: f"torch.linalg.lstsq: other must be a matrix or batch of them, or a vector per input "
                         f"matrix (other.dim() one less), got {shapes}")
    torch._check(B.dim() >= 1 and A.shape[-2] == B.shape[-1 if A.dim() - 1 == B.dim() else -2],
                 lambda: f"torch.linalg.lstsq: input and other must have the same number of rows, got {shapes}")


def _least_squares_by_qr(A, B):
    """LAPACK's gels: the least-squares solution of a tall A from A = QR,
    the least-norm one of a wide A from A^H = QR. A must have full rank."""
    if A.shape[-2] >= A.shape[-1]:
        Q, R = torch.linalg.qr(A)
        return torch.linalg.solve_triangular(R, Q.mH @ B, upper=True)
    Q, R = torch.linalg.qr(A.mH)
    return Q @ torch.linalg.solve_triangular(R.mH, B, upper=False)


def _linalg_lstsq(A, B, rcond=None, *, driver=None):
    """The CPU's outputs for each driver: gels (the default, as on CUDA)
    assumes full rank and gives no rank; gelsy, gelsd and gelss give the
    least-norm solution of a rank-deficient A from its SVD, singular values
    below rcond times the largest dropped, and the rank; gelsd and gelss
    also the singular values. (LAPACK's gelsy cuts by the diagonal of a
    pivoted QR's R instead: where an rcond cuts a matrix's rank, its
    solution differs from the SVD's.) Rank and singular values are A's;
    the solution and residuals broadcast over both batches. Residuals
    (squared, per column) are given where A is tall and, but for gels, of
    full rank; gelsy gives none."""
    driver = driver or "gels"
    torch._check(driver in _LSTSQ_DRIVERS,
                 lambda: f"torch.linalg.lstsq: driver must be one of {', '.join(_LSTSQ_DRIVERS)}, got {driver!r}")
    _check_lstsq(A, B)
    vector = A.dim() - 1 == B.dim()
    B = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    none = A.new_empty(0, dtype=A.real.dtype)
    if driver == "gels":
        X, rank, singular_values = _least_squares_by_qr(A, B), none.long(), none
    else:
        U, S, Vh = torch.linalg.svd(A, full_matrices=False)
        kept = S > (torch.finfo(A.dtype).eps * max(m, n) if rcond is None else rcond) * S[..., :1]
        rank = kept.sum(-1)
        X = Vh.mH @ (torch.where(kept, S.reciprocal(), 0).unsqueeze(-1) * (U.mH @ B))
        singular_values = S if driver != "gelsy" else none
    full_rank = driver == "gels" or (driver != "gelsy" and bool((rank == n).all()))
    residuals = (A @ X - B).abs().square().sum(-2) if m > n and full_rank else none
    return X.squeeze(-1) if vector else X, residuals, rank, singular_values


def _written(op_name, outs, results):
    """out= arguments (name: tensor) resized to the results and filled with
    them; as on the CPU, each must be of a dtype its result casts to safely."""
    for (name, out), result in zip(outs.items(), results):
        if not torch.can_cast(result.dtype, out.dtype):
            raise RuntimeError(
                f"{op_name}: Expected {name} to be safely castable from {result.dtype} dtype, but got {name} "
                f"with dtype {out.dtype}; pass an out tensor of dtype {result.dtype}")
    for out, result in zip(outs.values(), results):
        out.resize_(result.shape).copy_(result)
    return tuple(outs.values())


def _linalg_lstsq_out(A, B, rcond=None, *, driver=None, **outs):
    return _written("torch.linalg.lstsq", outs, _linalg_lstsq(A, B, rcond, driver=driver))


def _ormqr(A, tau, C, left=True, transpose=False):
    """Q C, Q^H C, C Q or C Q^H for Q = H_1 ... H_k, the reflectors geqrf
    left in A and tau: Q formed whole by householder_product (the k
    reflectors, then identities), then one product."""
    torch.ops.aten.ormqr(A.to("meta"), tau.to("meta"), C.to("meta"), left, transpose)  # the CPU's checks
    size, k = A.shape[-2], tau.shape[-1]
    torch._check(k <= size, lambda: f"torch.ormqr: tau.shape[-1] ({k}) must be at most input.shape[-2] ({size}), "
                                    f"the order of Q; got input {list(A.shape)}, tau {list(tau.shape)}")
    reflectors = torch.nn.functional.pad(A[..., :k], (0, size - k))
    Q = torch.linalg.householder_product(reflectors, torch.nn.functional.pad(tau, (0, size - k)))
    Q = Q.mH if transpose else Q
    return Q @ C if left else C @ Q


def _ormqr_out(A, tau, C, left=True, transpose=False, *, out):
    return _written("torch.ormqr", {"out": out}, (_ormqr(A, tau, C, left, transpose),))[0]


_aten_tpu.impl("ormqr", _ormqr)
_aten_tpu.impl("ormqr.out", _ormqr_out)
_aten_tpu.impl("cholesky", _cholesky)
_aten_tpu.impl("linalg_lstsq", _linalg_lstsq)
_aten_tpu.impl("linalg_lstsq.out", _linalg_lstsq_out)
_aten_tpu.impl("_linalg_solve_ex", _linalg_solve_ex)
_aten_tpu.impl("_linalg_det", _linalg_det)
_aten_tpu.impl("_linalg_slogdet", _linalg_slogdet)


def _on_host(op, op_name):
    """op run on the CPU and its results brought back, as PyTorch's CUDA
    kernel runs the non-symmetric eigenproblem (MAGMA's geev works on the
    host): a round trip and a sync per call. out= arguments take the
    results' shapes."""
    def run(A, **outs):
        results = op(A.cpu())
        results = results if isinstance(results, tuple) else (results,)
        if not outs:
            results = tuple(r.to(A.device) for r in results)
            return results if len(results) > 1 else results[0]
        written = _written(op_name, {"eigenvalues" if k == "out" else k: v for k, v in outs.items()}, results)
        return written if len(written) > 1 else written[0]
    return run


_EIG, _EIGVALS = torch.ops.aten.linalg_eig.default, torch.ops.aten._linalg_eigvals.default
# The ops computed on the host: a captured program cannot hold them, so the
# compile backend cuts its graphs around them.
HOST_OPS = frozenset((_EIG, _EIGVALS))
_aten_tpu.impl("linalg_eig", _on_host(_EIG, "torch.linalg.eig"))
_aten_tpu.impl("linalg_eig.out", _on_host(_EIG, "torch.linalg.eig"))
_aten_tpu.impl("_linalg_eigvals", _on_host(_EIGVALS, "torch.linalg.eigvals"))
_aten_tpu.impl("linalg_eigvals.out", _on_host(_EIGVALS, "torch.linalg.eigvals"))
