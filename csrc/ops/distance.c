/* Pairwise distances: _cdist_forward(x1, x2, p, compute_mode) (torch.cdist)
 * and _cdist_backward(grad, x1, x2, p, cdist), batched over leading dims:
 * x1 [.., P, M] and x2 [.., R, M] give [.., P, R], the p-norm of each
 * difference (p = 0 counts the nonzero ones, p = inf takes the largest).
 * Every pair's difference is formed, [.., P, R, M]: exact where
 * PyTorch's matrix-product form for p = 2 (large inputs) cancels, and
 * within float32 rounding of it. The backward gives x1's gradient; PyTorch
 * asks for x2's by swapping the operands. float16/bfloat16 compute in
 * float32. */
#include <math.h>

#include "hlo/elementwise_extra_ops.h"
#include "ops/families.h"

/* x1 - x2 over every pair: [.., P, R, M], operands read at 1 and 2 (the
 * backward) or 0 and 1, broadcast over the batch of `out` ([.., P, R]). */
static hlo_value differences(tpu_lowering* l, int first, const hlo_type* out, tpu_dtype t) {
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
  hlo_value c = hlo_broadcast_in_dim(b, tpu_lower_value_as(l, first + 1, &x2), r + 1, pairs.dims, map2);
  return hlo_binary(b, "subtract", a, c);
}

static hlo_value sum_last(hlo_builder* b, hlo_value x, const char* reducer, double init) {
  const hlo_type* t = hlo_type_of(b, x);
  int64_t last = t->rank - 1;
  return hlo_reduce(b, x, hlo_constant(b, t->dtype, init), reducer, &last, 1);
}

static hlo_value powc(hlo_builder* b, hlo_value x, double e) {
  return hlo_binary(b, "power", x, hlo_constant_like(b, x, e));
}

static tpu_status lower_cdist(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  double p = tpu_lower_float(l, 2, 2.0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  hlo_value d = hlo_unary(b, "abs", differences(l, 0, &out, t)), r;
  if (p == 0)
    r = sum_last(b, hlo_convert(b, hlo_compare(b, "NE", d, hlo_constant_like(b, d, 0)), t), "add", 0);
  else if (isinf(p))
    r = sum_last(b, d, "maximum", 0);
  else if (p == 1)
    r = sum_last(b, d, "add", 0);
  else if (p == 2)
    r = hlo_unary(b, "sqrt", sum_last(b, hlo_binary(b, "multiply", d, d), "add", 0));
  else
    r = powc(b, sum_last(b, powc(b, d, p), "add", 0), 1.0 / p);
  tpu_lower_set_output(l, 0, r);
  return NULL;
}

/* d dist / d x1 per pair, times the gradient, summed over x2's rows:
 * sign(d) |d|^(p-1) / dist^(p-1) (p = 2: d / dist; p = 1: sign(d); inf:
 * sign(d) where |d| is the largest), 0 where dist is 0, for p = 0, and
 * (p < 1) where d is 0. */
static tpu_status lower_cdist_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type pairwise = tpu_lower_arg_type(l, 4), out = tpu_lower_output_type(l, 0);
  double p = tpu_lower_float(l, 3, 2.0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  pairwise.dtype = t;
  int r = pairwise.rank;
  hlo_value diff = differences(l, 1, &pairwise, t);
  hlo_type shape = *hlo_type_of(b, diff);
  int64_t keep[TPU_MAX_RANK];
  for (int d = 0; d < r; d++) keep[d] = d;
  hlo_value dist = hlo_broadcast_in_dim(b, tpu_lower_value(l, 4, t), shape.rank, shape.dims, keep);
  hlo_value grad = hlo_broadcast_in_dim(b, tpu_lower_value(l, 0, t), shape.rank, shape.dims, keep);
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
                      hlo_binary(b, "multiply", sign, powc(b, hlo_binary(b, "divide", abs, dist), p - 1)));
  part = hlo_select(b, hlo_compare(b, "EQ", dist, zero), zero, hlo_binary(b, "multiply", part, grad));
  int64_t rows = r - 1; /* x2's rows, R */
  tpu_lower_set_output(l, 0, hlo_reduce(b, part, hlo_constant(b, t, 0), "add", &rows, 1));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_cdist_backward", lower_cdist_backward, false},
    {"_cdist_forward", lower_cdist, false},
};

TPU_OP_FAMILY(tpu_ops_distance, entries);
