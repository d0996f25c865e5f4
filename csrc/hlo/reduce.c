/* Reductions: reduce with a binary reducer, and argmax/argmin. */
#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"

hlo_value reduce_with_region(hlo_builder* b, hlo_value x, hlo_value init, const int64_t* dims,
                             int dim_count, hlo_combine_fn combine, const void* context) {
  hlo_value operands[2] = {x, init};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type in = *hlo_type_of(b, x);
  if (dim_count == 0) return x;
  hlo_type out = {in.dtype, 0, {0}};
  for (int i = 0; i < in.rank; i++) {
    bool reduced = false;
    for (int j = 0; j < dim_count; j++) reduced = reduced || dims[j] == i;
    if (!reduced) out.dims[out.rank++] = in.dims[i];
  }
  hlo_type scalar = {in.dtype, 0, {0}};
  hlo_type arg_types[2] = {scalar, scalar};
  hlo_value args[2];
  region_begin(b, arg_types, 2, args);
  hlo_value r = combine(b, args[0], args[1], context);
  region_end(b, &r, 1);
  char attrs[256];
  attr_i64_array(attrs, sizeof attrs, "dimensions", dims, dim_count);
  return emit_op(b, "stablehlo.reduce", operands, 2, attrs, out);
}

static hlo_value combine_binary(hlo_builder* b, hlo_value x, hlo_value y, const void* op) {
  return hlo_binary(b, (const char*)op, x, y);
}

hlo_value hlo_reduce(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                     const int64_t* dims, int dim_count) {
  return reduce_with_region(b, x, init, dims, dim_count, combine_binary, reducer);
}

/* Region deciding whether (a, ia) beats (b, ib): strictly better value, or a
 * NaN against a non-NaN, or a tie broken by the lower index. */
static void arg_reduce_region(hlo_builder* b, tpu_dtype dtype, bool is_max) {
  hlo_type s = {dtype, 0, {0}};
  hlo_type si = {TPU_I64, 0, {0}};
  hlo_type types[4] = {s, si, s, si};
  hlo_value a[4];
  region_begin(b, types, 4, a);
  hlo_value better = hlo_compare(b, is_max ? "GT" : "LT", a[0], a[2]);
  hlo_value tie = hlo_compare(b, "EQ", a[0], a[2]);
  if (tpu_dtype_is_float(dtype)) {
    hlo_value a_nan = hlo_compare(b, "NE", a[0], a[0]);
    hlo_value b_nan = hlo_compare(b, "NE", a[2], a[2]);
    better = hlo_binary(b, "or", better, hlo_binary(b, "and", a_nan, hlo_unary(b, "not", b_nan)));
    tie = hlo_binary(b, "or", tie, hlo_binary(b, "and", a_nan, b_nan));
  }
  hlo_value lower = hlo_compare(b, "LT", a[1], a[3]);
  hlo_value pick_a = hlo_binary(b, "or", better, hlo_binary(b, "and", tie, lower));
  hlo_value results[2] = {hlo_select(b, pick_a, a[0], a[2]), hlo_select(b, pick_a, a[1], a[3])};
  region_end(b, results, 2);
}

void hlo_arg_reduce(hlo_builder* b, hlo_value x, int dim, bool is_max, hlo_value* out_values,
                    hlo_value* out_indices) {
  *out_values = *out_indices = HLO_INVALID;
  if (!values_valid(b, &x, 1)) return;
  hlo_type in = *hlo_type_of(b, x);
  hlo_type index_type = in;
  index_type.dtype = TPU_I64;
  hlo_value indices = hlo_iota(b, index_type, dim);
  /* The init loses every comparison: worst value, largest index. */
  hlo_value init = hlo_constant_extreme(b, in.dtype, !is_max);
  hlo_value index_init = hlo_constant_i64(b, TPU_I64, INT64_MAX);
  arg_reduce_region(b, in.dtype, is_max);
  hlo_value operands[4] = {x, indices, init, index_init};
  if (!values_valid(b, operands, 4)) return;
  hlo_type out = {in.dtype, 0, {0}};
  for (int i = 0; i < in.rank; i++)
    if (i != dim) out.dims[out.rank++] = in.dims[i];
  hlo_type out_index = out;
  out_index.dtype = TPU_I64;
  hlo_type results[2] = {out, out_index};
  int64_t d = dim;
  char attrs[64];
  attr_i64_array(attrs, sizeof attrs, "dimensions", &d, 1);
  hlo_value first = new_results(b, results, 2);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.reduce", operands, 4, attrs, results, 2, first);
  *out_values = first;
  *out_indices = first + 1;
}
