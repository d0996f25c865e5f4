/* Pairwise distances: _cdist_forward(x1, x2, p, compute_mode) (torch.cdist)
 * and _cdist_backward(grad, x1, x2, p, cdist), batched over leading dims:
 * x1 [.., P, M] and x2 [.., R, M] give [.., P, R], the p-norm of each
 * difference (p = 0 counts the nonzero ones, p = inf takes the largest).
 * Every pair's difference is formed, [.., P, R, M]: exact where
 * PyTorch's matrix-product form for p = 2 (large inputs) cancels, and
 * within float32 rounding of it. The backward gives x1's gradient; PyTorch
 * asks for x2's by swapping the operands. _pdist_forward(self, p)
 * (F.pdist) and _pdist_backward: the pairs of self's rows i < j, from the
 * same code. float16/bfloat16 compute in float32. */
#include <math.h>

#include "hlo/elementwise_extra_ops.h"
#include "hlo/reduce_extra_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

/* x1 - x2 over every pair: [.., P, R, M], x1 read at argument `first` and
 * x2 at `second` (the same one for pdist), broadcast over the batch of
 * `out` ([.., P, R]). */
static hlo_value differences(tpu_lowering* l, int first, int second, const hlo_type* out, tpu_dtype t) {
  hlo_builder* b = tpu_lower_builder(l);
  int r = out->rank;
  int64_t m = tpu_lower_arg_type(l, first).dims[tpu_lower_arg_type(l, first).rank - 1];
  hlo_type x1 = *out, x2 = *out, pairs = *out;
  x1.dtype = x2.dtype = pairs.dtype = t;
  x1.dims[r - 1] = m;                       /* [.., P, M] */
  x2.dims[r - 2] = out->dims[r - 1];        /* [.., R, M] */
  x2.dims[r - 1] = m;
  pairs.dims[r] = m;
  pairs.rank = r + 1;
  int64_t map1[TPU_MAX_RANK], map2[TPU_MAX_RANK];
  for (int d = 0; d < r - 2; d++) map1[d] = map2[d] = d;
  map1[r - 2] = r - 2, map1[r - 1] = r;     /* P, M */
  map2[r - 2] = r - 1, map2[r - 1] = r;     /* R, M */
  hlo_value a = hlo_broadcast_in_dim(b, tpu_lower_value_as(l, first, &x1), r + 1, pairs.dims, map1);
  hlo_value c = hlo_broadcast_in_dim(b, tpu_lower_value_as(l, second, &x2), r + 1, pairs.dims, map2);
  return hlo_binary(b, "subtract", a, c);
}

/* The p-norm of each pair's difference: [.., P, R, M] -> [.., P, R]. */
static hlo_value pair_norms(hlo_builder* b, hlo_value diff, double p) {
  int64_t last = hlo_type_of(b, diff)->rank - 1;
  return hlo_vector_norm(b, diff, p, &last, 1);
}

static tpu_status lower_cdist(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_value diff = differences(l, 0, 1, &out, tpu_dtype_compute(out.dtype));
  tpu_lower_set_output(l, 0, pair_norms(tpu_lower_builder(l), diff, tpu_lower_float(l, 2, 2.0)));
  return NULL;
}

/* d dist / d x1 per pair, times the gradient, summed over x2's rows:
 * sign(d) |d|^(p-1) / dist^(p-1) (p = 2: d / dist; p = 1: sign(d); inf:
 * sign(d) where |d| is the largest), 0 where dist is 0, for p = 0, and
 * (p < 1) where d is 0. diff is [.., P, R, M]; dist and grad [.., P, R]. */
static hlo_value x1_gradient(hlo_builder* b, hlo_value diff, hlo_value dist, hlo_value grad, double p) {
  hlo_type shape = *hlo_type_of(b, diff);
  int r = shape.rank - 1;
  int64_t keep[TPU_MAX_RANK];
  for (int d = 0; d < r; d++) keep[d] = d;
  dist = hlo_broadcast_in_dim(b, dist, shape.rank, shape.dims, keep);
  grad = hlo_broadcast_in_dim(b, grad, shape.rank, shape.dims, keep);
  hlo_value zero = hlo_constant_like(b, diff, 0), sign = hlo_sign(b, diff), abs = hlo_unary(b, "abs", diff), part;
  if (p == 0)
    part = zero;
  else if (p == 1)
    part = sign;
  else if (isinf(p))
    part = hlo_select(b, hlo_compare(b, "EQ", abs, dist), sign, zero);
  else if (p == 2)
    part = hlo_binary(b, "divide", diff, dist);
  else
    part = hlo_select(b, hlo_compare(b, "EQ", abs, zero), zero,
                      hlo_binary(b, "multiply", sign,
                                 hlo_binary_constant(b, "power", hlo_binary(b, "divide", abs, dist), p - 1)));
  part = hlo_select(b, hlo_compare(b, "EQ", dist, zero), zero, hlo_binary(b, "multiply", part, grad));
  int64_t rows = r - 1; /* x2's rows, R */
  return hlo_reduce(b, part, hlo_constant(b, shape.dtype, 0), "add", &rows, 1);
}

/* _cdist_backward(grad, x1, x2, p, cdist): x1's gradient. */
static tpu_status lower_cdist_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type pairwise = tpu_lower_arg_type(l, 4), out = tpu_lower_output_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  pairwise.dtype = t;
  hlo_value diff = differences(l, 1, 2, &pairwise, t);
  tpu_lower_set_output(l, 0, x1_gradient(b, diff, tpu_lower_value(l, 4, t), tpu_lower_value(l, 0, t),
                                         tpu_lower_float(l, 3, 2.0)));
  return NULL;
}

/* pdist's pairs (i < j, row-major) as positions of the flat [N, N] grid:
 * each kept position's rank among the kept ones, `count` (past the end)
 * for the others. */
static hlo_value pair_slots(hlo_builder* b, int64_t n, int64_t count) {
  int64_t grid = n * n;
  hlo_value k = hlo_iota(b, hlo_type_make(TPU_I64, 1, &grid), 0);
  hlo_value row = hlo_binary(b, "divide", k, hlo_constant_like(b, k, (double)n));
  hlo_value kept = hlo_compare(b, "GT", hlo_binary(b, "remainder", k, hlo_constant_like(b, k, (double)n)), row);
  return hlo_select(b, kept, hlo_true_ranks(b, kept), hlo_constant_like(b, k, (double)count));
}

/* A [count] vector of pair values spread to the symmetric [N, N] grid, 0
 * on the diagonal. */
static hlo_value spread_pairs(hlo_builder* b, hlo_value pairs, int64_t n, int64_t count) {
  int64_t grid = n * n, square[2] = {n, n};
  hlo_value slots = pair_slots(b, n, count);
  hlo_value kept = hlo_compare(b, "LT", slots, hlo_constant_like(b, slots, (double)count));
  hlo_value safe = hlo_select(b, kept, slots, hlo_constant_like(b, slots, 0));
  hlo_value upper = hlo_select(b, kept, hlo_take(b, pairs, 0, safe), hlo_filled(b, hlo_type_of(b, pairs)->dtype, 1, &grid, 0));
  upper = hlo_reshape(b, upper, 2, square);
  return hlo_binary(b, "add", upper, hlo_transpose(b, upper, (int64_t[]){1, 0}));
}

/* _pdist_forward(self [N, M], p): the p-norm distance of each pair of rows
 * i < j, in row-major order ([N (N - 1) / 2]). */
static tpu_status lower_pdist(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t n = tpu_lower_arg_type(l, 0).dims[0], count = out.dims[0], grid = n * n;
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  if (count == 0) {
    tpu_lower_set_output(l, 0, hlo_filled(b, t, 1, &count, 0));
    return NULL;
  }
  hlo_type square = hlo_type_make(t, 2, (int64_t[]){n, n});
  hlo_value all = hlo_reshape(b, pair_norms(b, differences(l, 0, 0, &square, t), tpu_lower_float(l, 1, 2.0)), 1, &grid);
  tpu_lower_set_output(l, 0, hlo_put(b, hlo_filled(b, t, 1, &count, 0), 0, pair_slots(b, n, count), all, NULL));
  return NULL;
}

/* _pdist_backward(grad, self, p, pdist): cdist's backward of self with
 * itself, the pair gradients and distances spread symmetrically (each row
 * is x1 in its pairs with later rows and x2 in those with earlier ones). */
static tpu_status lower_pdist_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t n = out.dims[0], count = tpu_lower_arg_type(l, 0).dims[0];
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  if (count == 0) {
    tpu_lower_set_output(l, 0, hlo_filled(b, t, out.rank, out.dims, 0));
    return NULL;
  }
  hlo_type square = hlo_type_make(t, 2, (int64_t[]){n, n});
  hlo_value grad = spread_pairs(b, tpu_lower_value(l, 0, t), n, count);
  hlo_value dist = spread_pairs(b, tpu_lower_value(l, 3, t), n, count);
  tpu_lower_set_output(l, 0, x1_gradient(b, differences(l, 1, 1, &square, t), dist, grad, tpu_lower_float(l, 2, 2.0)));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_cdist_backward", lower_cdist_backward, 0},
    {"_cdist_forward", lower_cdist, 0},
    {"_pdist_backward", lower_pdist_backward, 0},
    {"_pdist_forward", lower_pdist, 0},
};

TPU_OP_FAMILY(tpu_ops_distance, entries);
