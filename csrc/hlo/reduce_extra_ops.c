/* NaN-propagating max/min reductions, and running reductions. */
#include <math.h>

#include "hlo/builder_impl.h"
#include "hlo/elementwise_extra_ops.h"
#include "hlo/reduce_extra_ops.h"

static hlo_value combine_extreme(hlo_builder* b, hlo_value x, hlo_value y, const void* op) {
  return hlo_min_max(b, (const char*)op, x, y, true);
}

/* XLA's maximum (on CPU) may drop a NaN, so a float result is NaN where
 * any element is. Two reductions, each combining an operand once, rather
 * than one whose combine selects on NaN: chained over a long row's folded
 * slices (reduce.c), a combine reading each operand three times grew the
 * code XLA generates threefold per slice (16 slices took 110 s to compile). */
hlo_value hlo_reduce_extreme(hlo_builder* b, hlo_value x, hlo_value init, bool is_max,
                             const int64_t* dims, int dim_count) {
  hlo_value extreme = hlo_reduce(b, x, init, is_max ? "maximum" : "minimum", dims, dim_count);
  if (x == HLO_INVALID || !tpu_dtype_is_float(hlo_type_of(b, x)->dtype)) return extreme;
  hlo_value any_nan = hlo_reduce(b, hlo_compare(b, "NE", x, x), hlo_constant(b, TPU_BOOL, 0), "or", dims,
                                 dim_count);
  return hlo_select(b, any_nan, hlo_constant_like(b, extreme, NAN), extreme);
}

hlo_value hlo_vector_norm(hlo_builder* b, hlo_value x, double p, const int64_t* dims, int dim_count) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  hlo_value zero = hlo_constant(b, t, 0), a = hlo_unary(b, "abs", x);
  if (p == 0) return hlo_reduce(b, hlo_convert(b, hlo_convert(b, x, TPU_BOOL), t), zero, "add", dims, dim_count);
  if (isinf(p))
    return hlo_reduce_extreme(b, a, hlo_constant_extreme(b, t, p < 0), p > 0, dims, dim_count);
  if (p == 1) return hlo_reduce(b, a, zero, "add", dims, dim_count);
  if (p == 2)
    return hlo_unary(b, "sqrt", hlo_reduce(b, hlo_binary(b, "multiply", x, x), zero, "add", dims, dim_count));
  hlo_value sum = hlo_reduce(b, hlo_binary(b, "power", a, hlo_constant_like(b, a, p)), zero, "add", dims, dim_count);
  return hlo_binary(b, "power", sum, hlo_constant_like(b, sum, 1 / p));
}

hlo_value hlo_true_ranks(hlo_builder* b, hlo_value flat_mask) {
  hlo_value count = hlo_cumulative(b, hlo_convert(b, flat_mask, TPU_I64), hlo_constant(b, TPU_I64, 0), "add", 0);
  return hlo_binary(b, "subtract", count, hlo_constant_like(b, count, 1));
}

/* A log-depth scan (Hillis and Steele): step k combines each element with
 * the one 2^k places before it (the identity where there is none), so n
 * elements take ceil(log2 n) steps of n combines. A reduce_window with a
 * window the size of the dimension would do n^2 work on backends that do
 * not rewrite it. */
hlo_value hlo_scan(hlo_builder* b, hlo_value x, hlo_value init, hlo_combine_fn combine,
                   const void* context, int dim) {
  hlo_value operands[2] = {x, init};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type in = *hlo_type_of(b, x);
  if (dim < 0 || dim >= in.rank)
    return hlo_fail(b, TPU_INTERNAL, "cumulative dim %d out of range for rank %d", dim, in.rank);
  int64_t zeros[TPU_MAX_RANK] = {0}, ones[TPU_MAX_RANK], low[TPU_MAX_RANK] = {0};
  for (int i = 0; i < in.rank; i++) ones[i] = 1;
  for (int64_t shift = 1; shift < in.dims[dim]; shift *= 2) {
    low[dim] = shift;
    hlo_value padded = hlo_pad(b, x, init, low, zeros, zeros);
    hlo_value shifted = hlo_slice(b, padded, zeros, in.dims, ones);
    x = combine(b, shifted, x, context);
  }
  return x;
}

static hlo_value combine_binary(hlo_builder* b, hlo_value x, hlo_value y, const void* op) {
  return hlo_binary(b, (const char*)op, x, y);
}

hlo_value hlo_cumulative(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                         int dim) {
  return hlo_scan(b, x, init, combine_binary, reducer, dim);
}

hlo_value hlo_cumulative_extreme(hlo_builder* b, hlo_value x, hlo_value init, bool is_max, int dim) {
  return hlo_scan(b, x, init, combine_extreme, is_max ? "maximum" : "minimum", dim);
}
