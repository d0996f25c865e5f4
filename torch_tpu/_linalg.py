"""torch.linalg.solve, det and slogdet on the tpu, computed as PyTorch's
CPU and CUDA kernels compute them: from the LU factors (linalg_lu_factor_ex
and linalg_lu_solve, lowered in csrc/ops/factorizations.c), which they return for the
backward formulas to reuse. det and slogdet factor A^T for a contiguous real
A (LAPACK wants columns; det(A^T) = det(A)), solve factors A itself; the
factors returned here are the same ones. Also the deprecated torch.cholesky:
linalg_cholesky_ex (csrc/ops/triangular.c) with its info read back, as
PyTorch's kernel does."""
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


_aten_tpu.impl("cholesky", _cholesky)
_aten_tpu.impl("_linalg_solve_ex", _linalg_solve_ex)
_aten_tpu.impl("_linalg_det", _linalg_det)
_aten_tpu.impl("_linalg_slogdet", _linalg_slogdet)
