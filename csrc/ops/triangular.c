/* Cholesky factors and triangular solves, batched: linalg_cholesky_ex (so
 * torch.linalg.cholesky, torch.cholesky and the Gaussian distributions'
 * scale_tril), linalg_solve_triangular and the older triangular_solve,
 * and solves with a Cholesky factor (_cholesky_solve_helper, so
 * torch.cholesky_solve, and cholesky_inverse); real and complex. Their
 * backwards are PyTorch's formulas over these and matmul. */
#include "hlo/complex_ops.h"
#include "hlo/conv_ops.h"
#include "hlo/linalg_ops.h"
#include "ops/families.h"

/* Row and column positions of a batch of matrices of type t. */
static void positions(hlo_builder* b, const hlo_type* t, hlo_value* row, hlo_value* col) {
  hlo_type at = *t;
  at.dtype = TPU_I64;
  *row = hlo_iota(b, at, t->rank - 2);
  *col = hlo_iota(b, at, t->rank - 1);
}

/* linalg_cholesky_ex(self, upper, check_errors) -> (L, info). The factor's
 * other triangle is 0. info is 0 for a positive-definite matrix, else the
 * first diagonal entry of XLA's factor that is NaN or not positive: XLA
 * does not say which leading minor failed (the CPU plugin's factor is NaN
 * throughout), so this order may be lower than LAPACK's. torch.linalg.
 * cholesky reads info back and raises, as on CUDA. */
static tpu_status lower_cholesky(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  bool upper = tpu_lower_bool(l, 1, false);
  hlo_value factor = hlo_cholesky(b, tpu_lower_tensor(l, 0), !upper);
  hlo_value row, col;
  positions(b, &t, &row, &col);
  hlo_value zero = hlo_constant_like(b, factor, 0);
  factor = hlo_select(b, upper ? hlo_compare(b, "LE", row, col) : hlo_compare(b, "GE", row, col), factor, zero);
  int64_t last = t.rank - 1, n = t.dims[t.rank - 1];
  /* a Hermitian matrix's factor has a real diagonal */
  hlo_value diagonal = hlo_real(b, hlo_reduce(b, hlo_select(b, hlo_compare(b, "EQ", row, col), factor, zero),
                                              hlo_constant(b, t.dtype, 0), "add", &last, 1));
  hlo_type per_minor = *hlo_type_of(b, diagonal);
  per_minor.dtype = TPU_I32;
  hlo_value order = hlo_binary_constant(b, "add", hlo_iota(b, per_minor, per_minor.rank - 1), 1);
  hlo_value never = hlo_constant_like(b, order, (double)(n + 1));
  hlo_value failed = hlo_unary(b, "not", hlo_compare(b, "GT", diagonal, hlo_constant_like(b, diagonal, 0)));
  int64_t minors = per_minor.rank - 1;
  hlo_value first = hlo_reduce(b, hlo_select(b, failed, order, never), hlo_constant(b, TPU_I32, (double)(n + 1)),
                               "minimum", &minors, 1);
  hlo_value info = hlo_select(b, hlo_compare(b, "EQ", first, hlo_constant_like(b, first, (double)(n + 1))),
                              hlo_constant_like(b, first, 0), first);
  tpu_lower_set_output(l, 0, factor);
  tpu_lower_set_output(l, 1, info);
  return NULL;
}

/* linalg_solve_triangular(A, B, upper, left, unitriangular): X with A X = B
 * (left) or X A = B, batch dims broadcast. */
static tpu_status lower_solve_triangular(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0), a_type = out;
  int64_t n = tpu_lower_arg_type(l, 0).dims[tpu_lower_arg_type(l, 0).rank - 1];
  a_type.dims[out.rank - 2] = a_type.dims[out.rank - 1] = n;
  hlo_value a = tpu_lower_value_as(l, 0, &a_type), rhs = tpu_lower_value_as(l, 1, &out);
  tpu_lower_set_output(l, 0, hlo_triangular_solve(b, a, rhs, tpu_lower_bool(l, 3, true), !tpu_lower_bool(l, 2, false),
                                                  tpu_lower_bool(l, 4, false), HLO_AS_IS));
  return NULL;
}

/* triangular_solve(B, A, upper, transpose, unitriangular) -> (X,
 * cloned_coefficient): X with A X = B (A^T X = B if transpose), both
 * broadcast to their common batch. */
static tpu_status lower_triangular_solve(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type x_type = tpu_lower_output_type(l, 0), a_type = tpu_lower_output_type(l, 1);
  hlo_value a = tpu_lower_value_as(l, 1, &a_type), rhs = tpu_lower_value_as(l, 0, &x_type);
  tpu_lower_set_output(l, 0, hlo_triangular_solve(b, a, rhs, true, !tpu_lower_bool(l, 2, true),
                                                  tpu_lower_bool(l, 4, false),
                                                  tpu_lower_bool(l, 3, false) ? HLO_TRANSPOSED : HLO_AS_IS));
  tpu_lower_set_output(l, 1, a);
  return NULL;
}

/* X with A X = rhs for A = L L^H (upper: U^H U) given the factor: two
 * triangular solves, the factor read as is in one, as its adjoint in the
 * other. */
static hlo_value cholesky_solve(hlo_builder* b, hlo_value factor, hlo_value rhs, bool upper) {
  hlo_value y = hlo_triangular_solve(b, factor, rhs, true, !upper, false, upper ? HLO_ADJOINT : HLO_AS_IS);
  return hlo_triangular_solve(b, factor, y, true, !upper, false, upper ? HLO_AS_IS : HLO_ADJOINT);
}

/* _cholesky_solve_helper(B, factor, upper): the batch dims already
 * broadcast by cholesky_solve. */
static tpu_status lower_cholesky_solve(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_value x = cholesky_solve(b, tpu_lower_value(l, 1, out.dtype), tpu_lower_value(l, 0, out.dtype),
                               tpu_lower_bool(l, 2, false));
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* cholesky_inverse(factor, upper): A^-1 as the solve of A X = I. */
static tpu_status lower_cholesky_inverse(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_value x = cholesky_solve(b, tpu_lower_value(l, 0, out.dtype), hlo_identity(b, out), tpu_lower_bool(l, 1, false));
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_cholesky_solve_helper", lower_cholesky_solve, TPU_OP_COMPLEX},
    {"cholesky_inverse", lower_cholesky_inverse, TPU_OP_COMPLEX},
    {"linalg_cholesky_ex", lower_cholesky, TPU_OP_COMPLEX},
    {"linalg_solve_triangular", lower_solve_triangular, TPU_OP_COMPLEX},
    {"triangular_solve", lower_triangular_solve, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_triangular, entries);
