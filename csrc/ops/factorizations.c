/* Matrix factorizations built from loops of StableHLO ops, one column a
 * step, all matrices of a batch at once.
 *
 * LU with partial pivoting and what stands on it: linalg_lu_factor_ex
 * (torch.linalg.lu_factor), linalg_lu_solve, linalg_inv_ex
 * (torch.linalg.inv), lu_unpack and linalg_lu (P, L, U);
 * torch_tpu/_linalg.py builds solve, det and slogdet on the first two as
 * PyTorch's kernels do. The factorization is LAPACK's getrf: the remaining
 * row with the largest magnitude in the column (the first of equals) is
 * swapped up, the rows under it take their multipliers, and the trailing
 * block its rank-one update. A zero pivot leaves its column unscaled and
 * sets info to its 1-based step, the first one only, as LAPACK's does.
 * Pivots are 1-based row swaps in order (LAPACK's ipiv), int32.
 *
 * QR by Householder reflections, LAPACK's geqrf and orgqr: geqrf (R above
 * the diagonal, the reflectors below it and their scales tau),
 * linalg_householder_product (Q from them) and linalg_qr. Each reflector
 * maps the column's remaining part to beta e_j, beta of the opposite sign
 * to its first entry, so R's diagonal signs are LAPACK's.
 *
 * The backwards are PyTorch's formulas over these. */
#include "hlo/complex_ops.h"
#include "hlo/linalg_ops.h"
#include "hlo/loop_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

/* Dims 0 .. rank - 1, the batch dims of a batch of matrices or vectors. */
static const int64_t leading[TPU_MAX_RANK] = {0, 1, 2, 3, 4, 5, 6, 7};

/* v (0-d, or [batch..]) over shape t whose leading dims are the batch. */
static hlo_value per_batch(hlo_builder* b, hlo_value v, const hlo_type* t) {
  return hlo_broadcast_in_dim(b, v, t->rank, t->dims, leading);
}

/* The entries of x at index i ([batch..], one per matrix) along `dim`,
 * keeping dim with size 1. */
static hlo_value pick(hlo_builder* b, hlo_value x, int dim, hlo_value i) {
  hlo_type t = *hlo_type_of(b, x);
  t.dtype = TPU_I64;
  t.dims[dim] = 1;
  return hlo_gather_elements(b, x, dim, per_batch(b, i, &t));
}

/* x with its entries at i and j ([batch..]) along `dim` exchanged. */
static hlo_value swapped(hlo_builder* b, hlo_value x, int dim, hlo_value i, hlo_value j) {
  hlo_type t = *hlo_type_of(b, x), positions = t;
  positions.dtype = TPU_I64;
  hlo_value at = hlo_iota(b, positions, dim);
  hlo_value xi = hlo_broadcast_to(b, pick(b, x, dim, i), t.rank, t.dims);
  hlo_value xj = hlo_broadcast_to(b, pick(b, x, dim, j), t.rank, t.dims);
  return hlo_select(b, hlo_compare(b, "EQ", at, per_batch(b, i, &positions)), xj,
                    hlo_select(b, hlo_compare(b, "EQ", at, per_batch(b, j, &positions)), xi, x));
}

/* x [batch.., len] with entry k (0-d, the same for every matrix) set to
 * v [batch..]: a loop step's record (a pivot, a reflector's scale). */
static hlo_value with_entry(hlo_builder* b, hlo_value x, hlo_value k, hlo_value v) {
  hlo_type t = *hlo_type_of(b, x), positions = t;
  positions.dtype = TPU_I64;
  hlo_value here = hlo_compare(b, "EQ", hlo_iota(b, positions, t.rank - 1),
                               hlo_broadcast_in_dim(b, k, t.rank, t.dims, NULL));
  return hlo_select(b, here, per_batch(b, hlo_convert(b, v, t.dtype), &t), x);
}

/* The batch part of a matrix type, [batch..], as i64. */
static hlo_type batch_of(const hlo_type* t) { return hlo_type_make(TPU_I64, t->rank - 2, t->dims); }

/* How large an entry is for pivoting: |x|, or |re| + |im| for complex x,
 * as LAPACK's izamax measures, so the pivots are the CPU's. */
static hlo_value pivot_size(hlo_builder* b, hlo_value x) {
  if (!tpu_dtype_is_complex(hlo_type_of(b, x)->dtype)) return hlo_unary(b, "abs", x);
  return hlo_binary(b, "add", hlo_unary(b, "abs", hlo_real(b, x)), hlo_unary(b, "abs", hlo_imag(b, x)));
}

/* One elimination step k: carried {a [batch.., m, n], pivots [batch.., min(m, n)] i32, info [batch..] i32}. */
static void factor_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  hlo_type at = *hlo_type_of(b, in[0]), bt = batch_of(&at);
  int r = at.rank;
  hlo_value k = hlo_broadcast_in_dim(b, step, bt.rank, bt.dims, NULL);
  hlo_type column_type = hlo_type_make(at.dtype, r - 1, at.dims), rows_type = column_type;
  rows_type.dtype = TPU_I64;
  hlo_value rows = hlo_iota(b, rows_type, r - 2);
  hlo_value column = hlo_reshape(b, pick(b, in[0], r - 1, k), r - 1, at.dims);
  hlo_value below = hlo_compare(b, "GE", rows, per_batch(b, k, &rows_type));
  hlo_value size = pivot_size(b, column);
  hlo_value candidates = hlo_select(b, below, size, hlo_constant_like(b, size, -1));
  hlo_value largest, p;
  hlo_arg_reduce(b, candidates, r - 2, true, &largest, &p);
  hlo_value a = swapped(b, in[0], r - 2, k, p);
  out[1] = with_entry(b, in[1], step, hlo_binary(b, "add", p, hlo_constant_like(b, p, 1))); /* 1-based */

  column = hlo_reshape(b, pick(b, a, r - 1, k), r - 1, at.dims);
  hlo_value pivot = hlo_reshape(b, pick(b, column, r - 2, k), bt.rank, bt.dims);
  hlo_value zero = hlo_compare(b, "EQ", pivot, hlo_constant_like(b, pivot, 0));
  hlo_value first_zero = hlo_binary(b, "and", zero, hlo_compare(b, "EQ", in[2], hlo_constant_like(b, in[2], 0)));
  out[2] = hlo_select(b, first_zero, hlo_convert(b, hlo_binary(b, "add", k, hlo_constant_like(b, k, 1)), TPU_I32),
                      in[2]);
  hlo_value divisor = hlo_select(b, zero, hlo_constant_like(b, pivot, 1), pivot);
  hlo_value under = hlo_compare(b, "GT", rows, per_batch(b, k, &rows_type));
  hlo_value multipliers = hlo_select(b, under, hlo_binary(b, "divide", column, per_batch(b, divisor, &column_type)),
                                     hlo_constant_like(b, column, 0));
  hlo_type positions = at;
  positions.dtype = TPU_I64;
  hlo_value cols = hlo_iota(b, positions, r - 1), kk = per_batch(b, k, &positions);
  hlo_value pivot_row_values = hlo_broadcast_to(b, pick(b, a, r - 2, k), r, at.dims);
  pivot_row_values = hlo_select(b, hlo_compare(b, "GT", cols, kk), pivot_row_values, hlo_constant_like(b, a, 0));
  hlo_value spread = hlo_broadcast_in_dim(b, multipliers, r, at.dims, leading);
  a = hlo_binary(b, "subtract", a, hlo_binary(b, "multiply", spread, pivot_row_values));
  hlo_value stored = hlo_binary(b, "and", hlo_compare(b, "GT", hlo_iota(b, positions, r - 2), kk),
                                hlo_compare(b, "EQ", cols, kk));
  out[0] = hlo_select(b, stored, spread, a);
}

/* getrf of a [batch.., m, n]: the packed factors, pivots and info. */
static void lu_factor(hlo_builder* b, hlo_value a, hlo_value* out_lu, hlo_value* out_pivots, hlo_value* out_info) {
  hlo_type at = *hlo_type_of(b, a), bt = batch_of(&at);
  int64_t steps = at.dims[at.rank - 2] < at.dims[at.rank - 1] ? at.dims[at.rank - 2] : at.dims[at.rank - 1];
  hlo_type pt = at;
  pt.dtype = TPU_I32;
  pt.rank = at.rank - 1;
  pt.dims[pt.rank - 1] = steps;
  hlo_value init[3] = {a, hlo_filled(b, TPU_I32, pt.rank, pt.dims, 0), hlo_filled(b, TPU_I32, bt.rank, bt.dims, 0)};
  hlo_value out[3] = {init[0], init[1], init[2]};
  if (hlo_type_numel(&at) > 0) /* no matrices (or empty ones): nothing to factor */
    hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, steps), init, 3, factor_step, NULL, out);
  *out_lu = out[0], *out_pivots = out[1], *out_info = out[2];
}

/* One swap of the permutation: carried {perm, pivots (0-based, i64)}. */
static void permute_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  hlo_type t = *hlo_type_of(b, in[0]), bt = hlo_type_make(TPU_I64, t.rank - 1, t.dims);
  hlo_value i = hlo_broadcast_in_dim(b, step, bt.rank, bt.dims, NULL);
  hlo_value p = hlo_reshape(b, pick(b, in[1], t.rank - 1, i), bt.rank, bt.dims);
  out[0] = swapped(b, in[0], t.rank - 1, i, p);
  out[1] = in[1];
}

/* The rows of the factored [.., rows, n] matrix in order: position i holds
 * the row of A that the swaps brought there ([batch.., rows] i64). */
static hlo_value row_order(hlo_builder* b, hlo_value pivots, int64_t rows) {
  hlo_type t = *hlo_type_of(b, pivots), order = t;
  t.dtype = order.dtype = TPU_I64;
  order.dims[order.rank - 1] = rows;
  hlo_value zero_based = hlo_binary(b, "subtract", hlo_convert(b, pivots, TPU_I64), hlo_filled(b, TPU_I64, t.rank, t.dims, 1));
  hlo_value init[2] = {hlo_iota(b, order, order.rank - 1), zero_based}, out[2] = {init[0], init[1]};
  if (hlo_type_numel(&t) > 0)
    hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, t.dims[t.rank - 1]), init, 2, permute_step, NULL, out);
  return out[0];
}

/* rhs [batch.., n, k] with its rows taken in `order` ([batch.., n]). */
static hlo_value rows_in_order(hlo_builder* b, hlo_value rhs, hlo_value order) {
  hlo_type t = *hlo_type_of(b, rhs);
  return hlo_gather_elements(b, rhs, t.rank - 2, hlo_broadcast_in_dim(b, order, t.rank, t.dims, leading));
}

/* x [batch.., m, n] as its adjoint [batch.., n, m]. */
static hlo_value adjoint_of(hlo_builder* b, hlo_value x) {
  int rank = hlo_type_of(b, x)->rank;
  int64_t order[TPU_MAX_RANK];
  for (int i = 0; i < rank; i++) order[i] = i;
  order[rank - 2] = rank - 1, order[rank - 1] = rank - 2;
  return hlo_conj(b, hlo_transpose(b, x, order));
}

/* X with A X = rhs (adjoint: A^H X = rhs) for A = P L U given as the packed
 * factors and the row order; all of one batch shape. */
static hlo_value lu_solve(hlo_builder* b, hlo_value lu, hlo_value order, hlo_value rhs, bool adjoint) {
  if (!adjoint) {
    hlo_value y = hlo_triangular_solve(b, lu, rows_in_order(b, rhs, order), true, true, true, HLO_AS_IS);
    return hlo_triangular_solve(b, lu, y, true, false, false, HLO_AS_IS);
  }
  /* U^H L^H P^T X = rhs: the factors solved transposed, then the rows put back. */
  hlo_value z = hlo_triangular_solve(b, lu, rhs, true, false, false, HLO_ADJOINT);
  hlo_value w = hlo_triangular_solve(b, lu, z, true, true, true, HLO_ADJOINT);
  hlo_type ot = *hlo_type_of(b, order);
  hlo_value place = hlo_scatter_elements(b, hlo_filled(b, TPU_I64, ot.rank, ot.dims, 0), ot.rank - 1, order,
                                         hlo_iota(b, ot, ot.rank - 1), NULL);
  return rows_in_order(b, w, place);
}

static bool check_float_matrices(tpu_lowering* l, int index, bool square) {
  hlo_type t = tpu_lower_arg_type(l, index);
  if (t.rank >= 2 && (tpu_dtype_is_float(t.dtype) || tpu_dtype_is_complex(t.dtype)) &&
      (!square || t.dims[t.rank - 1] == t.dims[t.rank - 2]))
    return true;
  char shape[96];
  tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                 "aten::%s: expected float or complex%s matrices [..., m, n], got %s of shape %s",
                 tpu_lower_op_name(l), square ? " square" : "", tpu_dtype_name(t.dtype),
                 hlo_shape_print(&t, shape, sizeof shape));
  return false;
}

/* The factors of argument 0 as (A, pivot, ...) ops take it. False after
 * an error. */
static bool factor_argument(tpu_lowering* l, hlo_value* lu, hlo_value* pivots, hlo_value* info) {
  if (!check_float_matrices(l, 0, false)) return false;
  if (!tpu_lower_bool(l, 1, true)) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::%s: LU without pivoting is not implemented on tpu (nor on the "
                   "CPU); pass pivot=True", tpu_lower_op_name(l));
    return false;
  }
  lu_factor(tpu_lower_builder(l), tpu_lower_value(l, 0, tpu_dtype_compute(tpu_lower_arg_type(l, 0).dtype)), lu,
            pivots, info);
  return true;
}

/* linalg_lu_factor_ex(A, pivot, check_errors) -> (LU, pivots, info). */
static tpu_status lower_lu_factor(tpu_lowering* l) {
  hlo_value lu, pivots, info;
  if (!factor_argument(l, &lu, &pivots, &info)) return NULL;
  tpu_lower_set_output(l, 0, lu);
  tpu_lower_set_output(l, 1, pivots);
  tpu_lower_set_output(l, 2, info);
  return NULL;
}

/* linalg_lu_solve(LU, pivots, B, left, adjoint): X with A X = B (left) or
 * X A = B, A^H for adjoint; batch dims broadcast. */
static tpu_status lower_lu_solve(tpu_lowering* l) {
  if (!check_float_matrices(l, 0, true)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type xt = tpu_lower_output_type(l, 0);
  xt.dtype = tpu_dtype_compute(xt.dtype);
  bool left = tpu_lower_bool(l, 3, true), adjoint = tpu_lower_bool(l, 4, false);
  int64_t n = tpu_lower_arg_type(l, 0).dims[tpu_lower_arg_type(l, 0).rank - 1];
  hlo_type lt = xt, pt = hlo_type_make(TPU_I32, xt.rank - 1, xt.dims);
  lt.dims[xt.rank - 2] = lt.dims[xt.rank - 1] = n;
  pt.dims[pt.rank - 1] = n;
  hlo_value lu = tpu_lower_value_as(l, 0, &lt), order = row_order(b, tpu_lower_value_as(l, 1, &pt), n);
  hlo_value rhs = tpu_lower_value_as(l, 2, &xt);
  /* X A = B is A^H X^H = B^H. */
  hlo_value x = left ? lu_solve(b, lu, order, rhs, adjoint)
                     : adjoint_of(b, lu_solve(b, lu, order, adjoint_of(b, rhs), !adjoint));
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* linalg_inv_ex(A, check_errors) -> (inverse, info): A's solve of the
 * identity; torch.linalg.inv reads info back and raises for a singular
 * matrix, as on CPU. */
static tpu_status lower_inv(tpu_lowering* l) {
  if (!check_float_matrices(l, 0, true)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  t.dtype = tpu_dtype_compute(t.dtype);
  hlo_value lu, pivots, info;
  lu_factor(b, tpu_lower_value(l, 0, t.dtype), &lu, &pivots, &info);
  tpu_lower_set_output(l, 0, lu_solve(b, lu, row_order(b, pivots, t.dims[t.rank - 1]), hlo_identity(b, t), false));
  tpu_lower_set_output(l, 1, info);
  return NULL;
}

/* Sets outputs first..first+2 to P [.., m, m], L [.., m, k] (unit
 * diagonal) and U [.., k, n] of A = P L U from the packed factors and
 * pivots; an output PyTorch sized empty (lu_unpack without unpack_pivots
 * or unpack_data) stays empty. */
static void unpack(tpu_lowering* l, hlo_value lu, hlo_value pivots, int first) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type at = *hlo_type_of(b, lu);
  int r = at.rank;
  int64_t m = at.dims[r - 2], n = at.dims[r - 1], k = m < n ? m : n;
  hlo_type pt = tpu_lower_output_type(l, first);
  if (hlo_type_numel(&pt) > 0) {
    /* Column c of P is the unit vector of row order[c]. */
    hlo_type positions = at;
    positions.dtype = TPU_I64;
    positions.dims[r - 1] = m;
    int64_t columns[TPU_MAX_RANK];
    for (int i = 0; i < r - 1; i++) columns[i] = i < r - 2 ? i : r - 1;
    hlo_value order = hlo_broadcast_in_dim(b, row_order(b, pivots, m), r, positions.dims, columns);
    tpu_lower_set_output(l, first, hlo_compare(b, "EQ", hlo_iota(b, positions, r - 2), order));
  } else {
    tpu_lower_set_output(l, first, hlo_constant(b, pt.dtype, 0));
  }
  for (int part = 1; part <= 2; part++) {
    hlo_type t = tpu_lower_output_type(l, first + part);
    if (hlo_type_numel(&t) == 0) {
      tpu_lower_set_output(l, first + part, hlo_constant(b, t.dtype, 0));
      continue;
    }
    bool lower = part == 1;
    hlo_value x = hlo_slice_dim(b, lu, lower ? r - 1 : r - 2, 0, k);
    hlo_type xt = *hlo_type_of(b, x), positions = xt;
    positions.dtype = TPU_I64;
    hlo_value row = hlo_iota(b, positions, r - 2), col = hlo_iota(b, positions, r - 1);
    hlo_value zero = hlo_constant_like(b, x, 0);
    hlo_value kept = hlo_select(b, hlo_compare(b, lower ? "GT" : "LE", row, col), x, zero);
    if (lower) kept = hlo_select(b, hlo_compare(b, "EQ", row, col), hlo_constant_like(b, x, 1), kept);
    tpu_lower_set_output(l, first + part, kept);
  }
}

/* lu_unpack(LU, pivots, unpack_data, unpack_pivots) -> (P, L, U). */
static tpu_status lower_lu_unpack(tpu_lowering* l) {
  if (!check_float_matrices(l, 0, false)) return NULL;
  unpack(l, tpu_lower_value(l, 0, tpu_dtype_compute(tpu_lower_arg_type(l, 0).dtype)), tpu_lower_tensor(l, 1), 0);
  return NULL;
}

/* linalg_lu(A, pivot) -> (P, L, U). */
static tpu_status lower_lu(tpu_lowering* l) {
  hlo_value lu, pivots, info;
  if (factor_argument(l, &lu, &pivots, &info)) unpack(l, lu, pivots, 0);
  return NULL;
}

/* (I - tau v v^H) x for x [batch.., m, c], v [batch.., m], tau [batch..]. */
static hlo_value reflected(hlo_builder* b, hlo_value x, hlo_value v, hlo_value tau) {
  hlo_type xt = *hlo_type_of(b, x), vt = *hlo_type_of(b, v);
  int r = xt.rank;
  int64_t rows = r - 2, w_dims[TPU_MAX_RANK];
  hlo_value w = hlo_dot_general(b, hlo_conj(b, v), x, leading, leading, r - 2, &rows, &rows, 1, xt.dtype); /* v^H x */
  for (int i = 0; i < r - 2; i++) w_dims[i] = i;
  w_dims[r - 2] = r - 1;
  hlo_value scaled_v = hlo_binary(b, "multiply", v, per_batch(b, tau, &vt));
  return hlo_binary(b, "subtract", x, hlo_binary(b, "multiply", hlo_broadcast_in_dim(b, scaled_v, r, xt.dims, leading),
                                                 hlo_broadcast_in_dim(b, w, r, xt.dims, w_dims)));
}

/* One Householder step j: carried {a [batch.., m, n], tau [batch.., k]}. */
static void householder_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out,
                             const void* context) {
  (void)context;
  hlo_type at = *hlo_type_of(b, in[0]), bt = batch_of(&at), ct = hlo_type_make(at.dtype, at.rank - 1, at.dims);
  int r = at.rank;
  hlo_value j = hlo_broadcast_in_dim(b, step, bt.rank, bt.dims, NULL);
  hlo_type row_positions = ct;
  row_positions.dtype = TPU_I64;
  hlo_value rows = hlo_iota(b, row_positions, r - 2), jr = per_batch(b, j, &row_positions);
  hlo_value column = hlo_reshape(b, pick(b, in[0], r - 1, j), r - 1, at.dims);
  hlo_value alpha = hlo_reshape(b, pick(b, column, r - 2, j), bt.rank, bt.dims);
  hlo_value below = hlo_compare(b, "GT", rows, jr), zero_column = hlo_constant_like(b, column, 0);
  hlo_value tail = hlo_select(b, below, column, zero_column);
  int64_t last = r - 2;
  /* |tail|^2 and |alpha|^2, real also for complex columns */
  hlo_value tail_squared = hlo_real(b, hlo_reduce(b, hlo_binary(b, "multiply", tail, hlo_conj(b, tail)),
                                                  hlo_constant(b, at.dtype, 0), "add", &last, 1));
  hlo_value re = hlo_real(b, alpha), im = hlo_imag(b, alpha), real_zero = hlo_constant_like(b, re, 0);
  hlo_value trivial = hlo_binary(b, "and", hlo_compare(b, "EQ", tail_squared, real_zero),
                                 hlo_compare(b, "EQ", im, real_zero));
  hlo_value squares = hlo_binary(b, "add", hlo_binary(b, "multiply", im, im), tail_squared);
  hlo_value length = hlo_unary(b, "sqrt", hlo_binary(b, "add", hlo_binary(b, "multiply", re, re), squares));
  hlo_value signed_length =
      hlo_select(b, hlo_compare(b, "GE", re, real_zero), hlo_unary(b, "negate", length), length);
  hlo_value beta = hlo_convert(b, signed_length, at.dtype);
  hlo_value zero = hlo_constant_like(b, alpha, 0);
  hlo_value safe_beta = hlo_select(b, trivial, hlo_constant_like(b, beta, 1), beta);
  hlo_value tau =
      hlo_select(b, trivial, zero, hlo_binary(b, "divide", hlo_binary(b, "subtract", beta, alpha), safe_beta));
  hlo_value gap = hlo_select(b, trivial, hlo_constant_like(b, alpha, 1), hlo_binary(b, "subtract", alpha, beta));
  hlo_value v = hlo_select(b, hlo_compare(b, "EQ", rows, jr), hlo_constant_like(b, column, 1),
                           hlo_binary(b, "divide", tail, per_batch(b, gap, &ct)));
  /* The trailing columns reflected. */
  hlo_type positions = at;
  positions.dtype = TPU_I64;
  hlo_value cols = hlo_iota(b, positions, r - 1), jj = per_batch(b, j, &positions);
  /* A := H^H A, as LAPACK's geqr2 applies each reflector */
  hlo_value a = hlo_select(b, hlo_compare(b, "GT", cols, jj), reflected(b, in[0], v, hlo_conj(b, tau)), in[0]);
  /* Column j keeps R's entry (beta, or alpha when nothing was reflected) and v under it. */
  hlo_value top = hlo_select(b, trivial, alpha, beta);
  hlo_value kept = hlo_select(b, hlo_compare(b, "EQ", rows, jr), per_batch(b, top, &ct), hlo_select(b, below, v, column));
  out[0] = hlo_select(b, hlo_compare(b, "EQ", cols, jj), hlo_broadcast_in_dim(b, kept, r, at.dims, leading), a);
  out[1] = with_entry(b, in[1], step, tau);
}

/* geqrf of a [batch.., m, n]: R and the reflectors packed, and tau. */
static void qr_factor(hlo_builder* b, hlo_value a, hlo_value* out_packed, hlo_value* out_tau) {
  hlo_type at = *hlo_type_of(b, a), tt = hlo_type_make(at.dtype, at.rank - 1, at.dims);
  int64_t m = at.dims[at.rank - 2], n = at.dims[at.rank - 1];
  tt.dims[tt.rank - 1] = m < n ? m : n;
  hlo_value init[2] = {a, hlo_filled(b, at.dtype, tt.rank, tt.dims, 0)}, out[2] = {init[0], init[1]};
  if (hlo_type_numel(&at) > 0)
    hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, tt.dims[tt.rank - 1]), init, 2, householder_step, NULL, out);
  *out_packed = out[0], *out_tau = out[1];
}

/* One reflector applied, the last first: carried {q [batch.., m, cols],
 * packed [batch.., m, n], tau [batch.., k]}, j = k - 1 - step. */
static void reflect_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  hlo_type qt = *hlo_type_of(b, in[0]), pt = *hlo_type_of(b, in[1]), bt = batch_of(&qt);
  hlo_type tt = *hlo_type_of(b, in[2]);
  int r = qt.rank;
  hlo_value last_j = hlo_constant_i64(b, TPU_I64, tt.dims[tt.rank - 1] - 1);
  hlo_value j = hlo_broadcast_in_dim(b, hlo_binary(b, "subtract", last_j, step), bt.rank, bt.dims, NULL);
  hlo_type ct = hlo_type_make(pt.dtype, r - 1, pt.dims), row_positions = ct;
  row_positions.dtype = TPU_I64;
  hlo_value rows = hlo_iota(b, row_positions, r - 2), jr = per_batch(b, j, &row_positions);
  hlo_value column = hlo_reshape(b, pick(b, in[1], r - 1, j), r - 1, pt.dims);
  hlo_value v = hlo_select(b, hlo_compare(b, "EQ", rows, jr), hlo_constant_like(b, column, 1),
                           hlo_select(b, hlo_compare(b, "GT", rows, jr), column, hlo_constant_like(b, column, 0)));
  out[0] = reflected(b, in[0], v, hlo_reshape(b, pick(b, in[2], r - 2, j), bt.rank, bt.dims));
  out[1] = in[1];
  out[2] = in[2];
}

/* orgqr: the first `cols` columns of H_0 .. H_{k-1} from geqrf's output. */
static hlo_value qr_q(hlo_builder* b, hlo_value packed, hlo_value tau, int64_t cols) {
  hlo_type pt = *hlo_type_of(b, packed), tt = *hlo_type_of(b, tau), qt = pt;
  qt.dims[qt.rank - 1] = cols;
  hlo_value eye = hlo_identity(b, qt);
  hlo_value init[3] = {eye, packed, tau}, out[3] = {eye, packed, tau};
  if (hlo_type_numel(&qt) > 0)
    hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, tt.dims[tt.rank - 1]), init, 3, reflect_step, NULL, out);
  return out[0];
}

/* geqrf(A) -> (a, tau). */
static tpu_status lower_geqrf(tpu_lowering* l) {
  if (!check_float_matrices(l, 0, false)) return NULL;
  hlo_value packed, tau;
  qr_factor(tpu_lower_builder(l), tpu_lower_value(l, 0, tpu_dtype_compute(tpu_lower_arg_type(l, 0).dtype)),
            &packed, &tau);
  tpu_lower_set_output(l, 0, packed);
  tpu_lower_set_output(l, 1, tau);
  return NULL;
}

/* linalg_householder_product(A, tau): the first n columns of the product
 * of the reflectors stored in A [.., m, n]. */
static tpu_status lower_householder_product(tpu_lowering* l) {
  if (!check_float_matrices(l, 0, false)) return NULL;
  hlo_type at = tpu_lower_arg_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(at.dtype);
  hlo_value q = qr_q(tpu_lower_builder(l), tpu_lower_value(l, 0, t), tpu_lower_value(l, 1, t), at.dims[at.rank - 1]);
  tpu_lower_set_output(l, 0, q);
  return NULL;
}

/* linalg_qr(A, mode) -> (Q, R): "reduced" Q [.., m, k] and R [.., k, n],
 * "complete" Q [.., m, m] and R [.., m, n], "r" R alone (Q empty). */
static tpu_status lower_qr(tpu_lowering* l) {
  if (!check_float_matrices(l, 0, false)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type at = tpu_lower_arg_type(l, 0), qt = tpu_lower_output_type(l, 0), rt = tpu_lower_output_type(l, 1);
  tpu_dtype t = tpu_dtype_compute(at.dtype);
  hlo_value packed, tau;
  qr_factor(b, tpu_lower_value(l, 0, t), &packed, &tau);
  tpu_lower_set_output(l, 0, hlo_type_numel(&qt) > 0 ? qr_q(b, packed, tau, qt.dims[qt.rank - 1])
                                                     : hlo_constant(b, qt.dtype, 0));
  hlo_value r = hlo_slice_dim(b, packed, at.rank - 2, 0, rt.dims[rt.rank - 2]);
  hlo_type positions = *hlo_type_of(b, r);
  positions.dtype = TPU_I64;
  hlo_value upper = hlo_compare(b, "LE", hlo_iota(b, positions, at.rank - 2), hlo_iota(b, positions, at.rank - 1));
  tpu_lower_set_output(l, 1, hlo_select(b, upper, r, hlo_constant_like(b, r, 0)));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"geqrf", lower_geqrf, TPU_OP_COMPLEX},
    {"linalg_householder_product", lower_householder_product, TPU_OP_COMPLEX},
    {"linalg_inv_ex", lower_inv, TPU_OP_COMPLEX},
    {"linalg_lu", lower_lu, TPU_OP_COMPLEX},
    {"linalg_lu_factor_ex", lower_lu_factor, TPU_OP_COMPLEX},
    {"linalg_lu_solve", lower_lu_solve, TPU_OP_COMPLEX},
    {"linalg_qr", lower_qr, TPU_OP_COMPLEX},
    {"lu_unpack", lower_lu_unpack, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_factorizations, entries);
