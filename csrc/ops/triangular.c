/* Cholesky factors and triangular solves: linalg_cholesky_ex (so
 * torch.linalg.cholesky, torch.cholesky and the Gaussian distributions'
 * scale_tril) and linalg_solve_triangular, batched. Their backwards are
 * PyTorch's formulas over these two and matmul. LU, QR, SVD and
 * eigendecompositions have no StableHLO op and stay unlowered. */
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
  hlo_value diagonal = hlo_reduce(b, hlo_select(b, hlo_compare(b, "EQ", row, col), factor, zero),
                                  hlo_constant(b, t.dtype, 0), "add", &last, 1);
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
                                                  tpu_lower_bool(l, 4, false)));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"linalg_cholesky_ex", lower_cholesky, 0},
    {"linalg_solve_triangular", lower_solve_triangular, 0},
};

TPU_OP_FAMILY(tpu_ops_triangular, entries);
